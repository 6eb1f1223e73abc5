# The matchd image: the single executable alone on a slim Debian, run as a non-root user.
# By default the build stage compiles it from source with npm (needs the npm registry); with
# MATCHD_PREBUILT=1 it takes the ./matchd built on the host (`npm run build`), so the build
# needs no network at all. The build stage is not shipped: nothing given to it is in the image.
#
#   docker build -t matchd .                                  # from source
#   docker build --build-arg MATCHD_PREBUILT=1 -t matchd .    # the host's ./matchd
#   docker build --build-arg EXTRA_CA_CERTS="$(cat proxy-ca.pem)" -t matchd .   # TLS proxy
ARG BUILD_IMAGE=node:20-bookworm-slim
ARG BASE=debian:bookworm-slim

FROM ${BUILD_IMAGE} AS build
# The legacy builder keeps this stage as an untagged image: the label lets a script prune it.
LABEL matchd.stage=build
WORKDIR /src
# matchd* is empty unless the context holds a host build; the wildcard lets it be missing.
COPY package.json package-lock.json tsconfig.json bunfig.toml matchd* ./
COPY src ./src
ARG MATCHD_PREBUILT=0
# PEM certificates that npm must trust on top of Node's own, for a TLS-intercepting proxy.
ARG EXTRA_CA_CERTS=""
RUN if [ "$MATCHD_PREBUILT" = 1 ]; then \
      test -x matchd || { echo "MATCHD_PREBUILT=1 needs ./matchd: run npm run build first" >&2; exit 1; }; \
    else \
      rm -f matchd; \
      if [ -n "$EXTRA_CA_CERTS" ]; then \
        printf '%s\n' "$EXTRA_CA_CERTS" >/tmp/extra-ca.pem; export NODE_EXTRA_CA_CERTS=/tmp/extra-ca.pem; \
      fi; \
      npm ci --no-audit --no-fund && npm run build; \
    fi

FROM ${BASE}
# Only glibc is needed: Bun carries its own root certificates, and the health check is bash.
RUN groupadd --system --gid 10001 matchd \
    && useradd --system --uid 10001 --gid matchd --no-create-home --shell /usr/sbin/nologin matchd
COPY --from=build /src/matchd /usr/local/bin/matchd
COPY docker/matchd/healthcheck.sh /usr/local/bin/matchd-healthcheck
USER matchd
# HTTP binds loopback by default; in a container the published port needs every interface.
ENV MATCHING_HTTP_HOST=0.0.0.0
# Bun's allocator keeps freed pages instead of returning each batch: less CPU (docs/operations.md).
ENV MIMALLOC_PURGE_DELAY=-1
EXPOSE 3002 3035
# No port is fixed here: the conductor listens on 3002 and the outbox on 3035 by default,
# or on MATCHING_HTTP_PORT when it is set. Set the port with that variable, not with
# --http-port: the health check reads the environment, not the command's arguments.
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 CMD ["matchd-healthcheck"]
ENTRYPOINT ["/usr/local/bin/matchd"]
CMD ["conductor"]
