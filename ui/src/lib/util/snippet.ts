/** Splits a search snippet at the store's highlight markers into text parts (rendered as text). */
import { HIGHLIGHT_END, HIGHLIGHT_START } from '../backend';

export interface SnippetPart {
  text: string;
  hit: boolean;
}

export function snippetParts(
  snippet: string,
  start: string = HIGHLIGHT_START,
  end: string = HIGHLIGHT_END,
): SnippetPart[] {
  const parts: SnippetPart[] = [];
  let rest = snippet;
  while (rest.length > 0) {
    const s = rest.indexOf(start);
    if (s < 0) break;
    const e = rest.indexOf(end, s + start.length);
    if (e < 0) break;
    if (s > 0) parts.push({ text: rest.slice(0, s), hit: false });
    parts.push({ text: rest.slice(s + start.length, e), hit: true });
    rest = rest.slice(e + end.length);
  }
  // Unmatched markers are dropped rather than shown as odd characters.
  const tail = rest.split(start).join('').split(end).join('');
  if (tail) parts.push({ text: tail, hit: false });
  return parts.filter((p) => p.text.length > 0);
}
