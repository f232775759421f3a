/** What the derive job knows of a venue (from Postgres). */
export interface VenueDeriveContext {
  operatorId: string;
  venueId: string;
  timezone: string;
  resetHour: number;
  retentionDays: number;
  /** Active zones by id, with their type: door zones count for the venue, others for themselves. */
  zones: Map<string, string>;
}
