/**
 * jsonb values are always sent as JSON text: node-postgres would turn a JavaScript array into a
 * PostgreSQL array literal, and text is read the same way by PGlite and PostgreSQL.
 */
export function toJson(value: unknown): string {
  return JSON.stringify(value);
}

/**
 * A large text parameter that is let go once it is sent. node-postgres keeps a query's values,
 * and Kysely its compiled query, until the answer comes; a bulk statement's 40–60 kB of JSON
 * held that long outlives two young-generation collections, is promoted to the old generation,
 * and brings the next full collection closer (docs/decisions.md, "Nothing of an entry held
 * during the wait"). node-postgres asks for the text (`toPostgres`) when it writes the Bind
 * message; on PGlite the embedded connection's `query` takes it out before serializing
 * (db/prepared-pglite.ts). Only for statements run on the database handle itself, not inside a
 * transaction (PGlite's transactions serialize their parameters on their own, and would refuse
 * it: it has no JSON or string form of its own).
 */
export class SentOnceText {
  #text: string | null;
  constructor(text: string) {
    this.#text = text;
  }

  /** The text, once: a second send is a mistake, refused rather than sent as NULL. */
  take(): string {
    const text = this.#text;
    if (text === null) throw new Error('a sent-once parameter was sent twice');
    this.#text = null;
    return text;
  }

  /**
   * Another sent-once parameter of the same text, made before this one is sent: for a statement
   * that may have to run again. It holds the text until it is sent in turn.
   */
  copy(): SentOnceText {
    if (this.#text === null) throw new Error('a sent-once parameter was copied after it was sent');
    return new SentOnceText(this.#text);
  }

  /** node-postgres's hook for a value of its own kind, called as the value is written. */
  toPostgres(): string {
    return this.take();
  }

  toJSON(): never {
    throw new Error('a sent-once parameter has no JSON form: send it on the database handle');
  }

  toString(): never {
    throw new Error('a sent-once parameter has no string form: send it on the database handle');
  }
}

/** A value's JSON as a parameter let go once sent (`SentOnceText`). */
export function toJsonSentOnce(value: unknown): SentOnceText {
  return new SentOnceText(JSON.stringify(value));
}
