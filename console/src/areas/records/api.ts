// The records endpoints the console reads (interface: Record (S2)).
export interface RecordDocument {
  id: string;
  name: string;
  mime: string;
  size: number;
  field: string | null;
  url: string;
}

export interface LeadRecord {
  id: string;
  entity: string;
  name: string;
  fields: Record<string, unknown>;
  source: string | null;
  documents: RecordDocument[];
  created_at: string;
  updated_at: string;
  crm?: { pipeline: string; stage: string } | null;
}

export interface RecordPage {
  records: LeadRecord[];
  next_cursor: string | null;
}
