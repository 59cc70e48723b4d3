import { NAME_PATTERN } from '../../http/schemas.ts';

/** A note with text: a character other than a blank, by the rule of names and of note bodies. */
const NOTE_TEXT = new RegExp(NAME_PATTERN, 'u');

/** The reason of the warning for a note that added nothing for being blank. */
export const BLANK_NOTE = 'blank';

/** Whether a note's text has a character other than a blank (else it adds nothing). */
export function isNoteText(text: string): boolean {
  return NOTE_TEXT.test(text);
}

/** The warning of a blank note (a form's empty textarea): no note, and no 422 for a form. */
export function blankNoteWarning(key: string): { key: string; reason: string; message: string } {
  return { key, reason: BLANK_NOTE, message: 'the note holds no text: no note was added' };
}
