/**
 * Which events a bench sink has already received, by event id `<commandId>:<ordinal>:<type>`.
 * For the commands a bench sent, one bit per ordinal: a set of every event id cost the
 * bench more CPU than any other step of receiving an event. Other ids go to a set.
 */
export class SeenEvents {
  private readonly ordinals: Int32Array;
  private readonly others = new Set<string>();

  constructor(commands: number) {
    this.ordinals = new Int32Array(commands);
  }

  /**
   * Records `eventId` of the command with index `command` (undefined: a command the bench
   * did not send); false when it was received before. `colon`: the id's first colon, which
   * the caller has usually found already to read the command id.
   */
  isNew(eventId: string, command: number | undefined, colon = eventId.indexOf(":")): boolean {
    const ordinal = Number(eventId.slice(colon + 1, eventId.indexOf(":", colon + 1)));
    if (command !== undefined && Number.isInteger(ordinal) && ordinal >= 0 && ordinal < 31) {
      const bit = 1 << ordinal;
      const fresh = (this.ordinals[command]! & bit) === 0;
      this.ordinals[command]! |= bit;
      return fresh;
    }
    if (this.others.has(eventId)) return false;
    this.others.add(eventId);
    return true;
  }
}
