/**
 * Pretty-printed JSON as a list of lines of typed tokens, so components can colour keys and
 * highlight paths while rendering only text (never HTML). Nothing is elided.
 */
import type { Json } from '../backend';

export type TokenKind = 'key' | 'string' | 'path' | 'number' | 'boolean' | 'null' | 'punct';
export interface Token {
  text: string;
  kind: TokenKind;
}
export type Line = { indent: number; tokens: Token[] };

const PATH_KEYS = /^(path|paths|file|files|filename|file_path|filepath|dir|directory|folder|cwd|root|target|source|destination|dest|from|to)$/i;

/** A string that names a file system location. */
export function looksLikePath(value: string, key?: string, known: readonly string[] = []): boolean {
  if (known.includes(value)) return true;
  if (value.length === 0 || value.includes('\n')) return false;
  if (/^(~|\/|[A-Za-z]:[\\/]|\\\\|\.\.?[\\/])/.test(value)) return true;
  return key !== undefined && PATH_KEYS.test(key) && !/^[a-z]+:\/\//i.test(value);
}

function scalar(v: Json, key: string | undefined, known: readonly string[]): Token {
  if (v === null) return { text: 'null', kind: 'null' };
  if (typeof v === 'boolean') return { text: String(v), kind: 'boolean' };
  if (typeof v === 'number') return { text: String(v), kind: 'number' };
  const s = v as string;
  return { text: JSON.stringify(s), kind: looksLikePath(s, key, known) ? 'path' : 'string' };
}

export function jsonLines(value: Json, knownPaths: readonly string[] = []): Line[] {
  const lines: Line[] = [];
  const walk = (v: Json, indent: number, prefix: Token[], suffix: string, key?: string) => {
    const end: Token[] = suffix ? [{ text: suffix, kind: 'punct' }] : [];
    if (Array.isArray(v)) {
      if (v.length === 0) {
        lines.push({ indent, tokens: [...prefix, { text: '[]', kind: 'punct' }, ...end] });
        return;
      }
      lines.push({ indent, tokens: [...prefix, { text: '[', kind: 'punct' }] });
      v.forEach((item, i) => walk(item, indent + 1, [], i < v.length - 1 ? ',' : '', key));
      lines.push({ indent, tokens: [{ text: ']', kind: 'punct' }, ...end] });
      return;
    }
    if (v !== null && typeof v === 'object') {
      const entries = Object.entries(v);
      if (entries.length === 0) {
        lines.push({ indent, tokens: [...prefix, { text: '{}', kind: 'punct' }, ...end] });
        return;
      }
      lines.push({ indent, tokens: [...prefix, { text: '{', kind: 'punct' }] });
      entries.forEach(([k, item], i) =>
        walk(
          item,
          indent + 1,
          [
            { text: JSON.stringify(k), kind: 'key' },
            { text: ': ', kind: 'punct' },
          ],
          i < entries.length - 1 ? ',' : '',
          k,
        ),
      );
      lines.push({ indent, tokens: [{ text: '}', kind: 'punct' }, ...end] });
      return;
    }
    lines.push({ indent, tokens: [...prefix, scalar(v, key, knownPaths), ...end] });
  };
  walk(value, 0, [], '');
  return lines;
}

/** The whole value as plain pretty JSON (for copying and for previews). */
export function prettyJson(value: Json | undefined): string {
  if (value === undefined) return '';
  return JSON.stringify(value, null, 2);
}
