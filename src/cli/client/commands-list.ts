/** The client commands' names, apart from their code, which main loads only when one runs. */
export const clientCommands = [
  "order",
  "pair",
  "session",
  "book",
  "watch",
  "result",
  "events",
] as const;
