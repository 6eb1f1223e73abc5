/**
 * Sockets for the hub without a server: each hands what it is sent to a callback, and a topic
 * publish reaches the sockets subscribed to the topic, as Bun's server.publish does.
 */

import type { ClientSocket, FeedHub } from "../../src/feed/hub";

export class TestSockets {
  private readonly members = new Map<string, Set<ClientSocket>>();

  /** Makes the hub's broadcasts reach these sockets. */
  constructor(hub: FeedHub) {
    hub.publishToTopic = (topic, text) => {
      for (const socket of this.members.get(topic) ?? []) socket.send(text);
    };
  }

  socket(receive: (text: string) => void): ClientSocket {
    const socket: ClientSocket = {
      send: (text) => {
        receive(text);
        return text.length;
      },
      bufferedAmount: () => 0,
      close: () => this.leaveAll(socket),
      subscribe: (topic) => {
        const members = this.members.get(topic) ?? new Set();
        members.add(socket);
        this.members.set(topic, members);
      },
      unsubscribe: (topic) => this.members.get(topic)?.delete(socket),
    };
    return socket;
  }

  private leaveAll(socket: ClientSocket): void {
    for (const members of this.members.values()) members.delete(socket);
  }
}
