-- Time-ordered ids (UUID version 7, RFC 9562 §5.7) for the rows that grow with every lead: the
-- first 48 bits are the Unix time in milliseconds, the rest random (version and variant bits
-- aside). New rows then go to the right-hand end of their primary key's index instead of onto a
-- random page of it, so that a table of millions of rows is written on a few hot pages: no page
-- reads, fewer dirtied pages and, after a checkpoint, far fewer full-page images in the WAL
-- (docs/decisions.md, "Time-ordered ids"). Records get theirs in the service (src/lib/ids.ts);
-- this function gives the same kind to rows whose ids the statements make themselves (intake
-- log, notes, record events, outbound messages and attempts). PostgreSQL 18 has `uuidv7()`;
-- this works from PostgreSQL 13 on and in the embedded database. `at` gives another time than
-- the clock's (the bench's growth seed gives its records the ids of their creation times).
CREATE OR REPLACE FUNCTION time_ordered_uuid(at timestamptz DEFAULT clock_timestamp()) RETURNS uuid
LANGUAGE sql VOLATILE PARALLEL SAFE AS $$
  SELECT encode(
    -- bits 52 and 53 turn the version nibble of gen_random_uuid() from 4 (0100) into 7 (0111)
    set_bit(set_bit(
      overlay(uuid_send(gen_random_uuid())
        PLACING substring(int8send(floor(date_part('epoch', at) * 1000)::bigint) FROM 3)
        FROM 1 FOR 6),
      52, 1), 53, 1),
    'hex')::uuid
$$;
