/**
 * Markdown for assistant text: marked parses, raw HTML in the source is shown as text (never
 * interpreted), images become links (no remote loads), and DOMPurify cleans the output with a
 * small allow-list. Links keep their href only when it is http(s) or mailto; clicks are handled
 * by the caller (`Markdown.svelte`) which opens them outside the app.
 */
import { Marked, type Tokens } from 'marked';
import DOMPurify from 'dompurify';

const SAFE_URL = /^(?:https?:|mailto:)/i;

function escapeHtml(s: string): string {
  return s
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;');
}

/** True for a URL the app may hand to the OS to open. */
export function isSafeUrl(href: string): boolean {
  const trimmed = href.trim();
  // Reject control characters and whitespace tricks such as "java\tscript:".
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(trimmed)) return false;
  return SAFE_URL.test(trimmed);
}

const marked = new Marked({
  gfm: true,
  breaks: false,
  async: false,
  renderer: {
    html({ text }: Tokens.HTML | Tokens.Tag): string {
      return escapeHtml(text);
    },
    image({ href, text }: Tokens.Image): string {
      const label = escapeHtml(text || href);
      if (!isSafeUrl(href)) return label;
      return `<a href="${escapeHtml(href)}" class="md-image-link">[image: ${label}]</a>`;
    },
  },
});

const ALLOWED_TAGS = [
  'p', 'br', 'hr', 'strong', 'em', 'del', 's', 'code', 'pre', 'blockquote',
  'ul', 'ol', 'li', 'a', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6',
  'table', 'thead', 'tbody', 'tr', 'th', 'td', 'input', 'span',
];
const ALLOWED_ATTR = ['href', 'title', 'class', 'type', 'checked', 'disabled', 'start', 'align'];

let hooked = false;
function purifier(): typeof DOMPurify {
  if (!hooked) {
    DOMPurify.addHook('afterSanitizeAttributes', (node) => {
      if (node.tagName === 'A') {
        const href = node.getAttribute('href') ?? '';
        if (!isSafeUrl(href)) node.removeAttribute('href');
        node.setAttribute('rel', 'noopener noreferrer');
      }
      if (node.tagName === 'INPUT' && node.getAttribute('type') !== 'checkbox') node.remove();
    });
    hooked = true;
  }
  return DOMPurify;
}

/** Markdown → sanitized HTML string, safe to insert. */
export function renderMarkdown(source: string): string {
  const raw = marked.parse(source) as string;
  return purifier().sanitize(raw, {
    ALLOWED_TAGS,
    ALLOWED_ATTR: [...ALLOWED_ATTR, 'rel'],
    ALLOW_DATA_ATTR: false,
    ALLOWED_URI_REGEXP: /^(?:https?:|mailto:)/i,
  });
}
