# Builds the single matchd executable, then ships it alone in a slim image as a non-root user.
FROM node:20-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json bunfig.toml ./
COPY src ./src
RUN npm run build

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends curl ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --no-create-home matchd
COPY --from=build /src/matchd /usr/local/bin/matchd
USER matchd
# HTTP binds loopback by default; in a container the published port needs every interface.
ENV MATCHING_HTTP_HOST=0.0.0.0
EXPOSE 3002 3035
# No port is fixed here: the conductor listens on 3002 and the outbox on 3035 by default,
# or on MATCHING_HTTP_PORT when it is set. Set the port with that variable, not with
# --http-port: the health check reads the environment, not the command's arguments.
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
  CMD if [ -n "$MATCHING_HTTP_PORT" ]; then curl -fsS "http://127.0.0.1:$MATCHING_HTTP_PORT/healthz"; \
      else curl -fsS http://127.0.0.1:3002/healthz || curl -fsS http://127.0.0.1:3035/healthz; fi || exit 1
ENTRYPOINT ["/usr/local/bin/matchd"]
CMD ["conductor"]
