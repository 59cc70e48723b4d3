-- A booking link made without a duration takes its calendar's slot length when it books, not
-- the one the calendar had when the link was made (docs/decisions.md, Booking: a link's
-- duration): NULL is "the slot length". Links made before keep the number they hold, which is
-- capped at the calendar's slot length when they book.
ALTER TABLE booking_links ALTER COLUMN duration_minutes DROP NOT NULL;
