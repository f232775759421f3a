/**
 * A JSON document that is already serialised (for example built by ClickHouse): the REST
 * transport sends the text as it is instead of parsing and re-encoding it. `toJSON` keeps it
 * correct anywhere it is serialised again.
 */
export class JsonText {
  constructor(readonly text: string) {}

  toJSON(): unknown {
    return JSON.parse(this.text);
  }
}
