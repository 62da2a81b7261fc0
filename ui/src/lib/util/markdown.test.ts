import { describe, expect, it } from 'vitest';
import { isSafeUrl, renderMarkdown } from './markdown';

function dom(html: string): HTMLElement {
  const div = document.createElement('div');
  div.innerHTML = html;
  return div;
}

describe('renderMarkdown', () => {
  it('renders ordinary markdown', () => {
    const d = dom(renderMarkdown('**bold** and `code`\n\n- one\n- two'));
    expect(d.querySelector('strong')?.textContent).toBe('bold');
    expect(d.querySelector('code')?.textContent).toBe('code');
    expect(d.querySelectorAll('li')).toHaveLength(2);
  });

  it('shows script tags as text and never creates a script element', () => {
    const out = renderMarkdown('hello <script>alert(1)</script> world');
    const d = dom(out);
    expect(d.querySelector('script')).toBeNull();
    expect(d.textContent).toContain('<script>alert(1)</script>');
  });

  it('neutralises a block of raw HTML with event handlers', () => {
    const d = dom(renderMarkdown('<img src=x onerror="alert(1)">\n\n<div onclick="x()">hi</div>'));
    expect(d.querySelector('img')).toBeNull();
    expect(d.querySelector('[onerror]')).toBeNull();
    expect(d.querySelector('[onclick]')).toBeNull();
    expect(d.textContent).toContain('onerror');
  });

  it('removes javascript: and data: link targets', () => {
    for (const src of [
      '[click](javascript:alert(1))',
      '[click](JaVaScRiPt:alert(1))',
      '[click](data:text/html;base64,PHNjcmlwdD4=)',
      '[click](vbscript:msgbox(1))',
      '<javascript:alert(1)>',
    ]) {
      const d = dom(renderMarkdown(src));
      for (const a of d.querySelectorAll('a')) {
        const href = a.getAttribute('href');
        expect(href === null || /^(https?:|mailto:)/i.test(href), `${src} -> ${href}`).toBe(true);
      }
      for (const el of d.querySelectorAll('*')) {
        for (const attr of el.attributes) expect(attr.value.toLowerCase()).not.toMatch(/script:|data:/);
      }
    }
  });

  it('keeps http links and marks them noopener', () => {
    const a = dom(renderMarkdown('[site](https://example.com/a?b=1)')).querySelector('a');
    expect(a?.getAttribute('href')).toBe('https://example.com/a?b=1');
    expect(a?.getAttribute('rel')).toBe('noopener noreferrer');
  });

  it('turns images into links so nothing remote loads', () => {
    const d = dom(renderMarkdown('![logo](https://example.com/x.png "t")'));
    expect(d.querySelector('img')).toBeNull();
    expect(d.querySelector('a')?.getAttribute('href')).toBe('https://example.com/x.png');
    const bad = dom(renderMarkdown('![x](javascript:alert(1))'));
    expect(bad.querySelector('a')).toBeNull();
  });

  it('drops svg, iframe, style and form elements', () => {
    const d = dom(
      renderMarkdown('text\n\n<svg><script>1</script></svg><iframe src="https://e"></iframe><style>*{}</style><form><input></form>'),
    );
    for (const tag of ['svg', 'iframe', 'style', 'form', 'script']) expect(d.querySelector(tag)).toBeNull();
  });
});

describe('isSafeUrl', () => {
  it('accepts http, https and mailto only', () => {
    expect(isSafeUrl('https://a.b')).toBe(true);
    expect(isSafeUrl('http://a.b')).toBe(true);
    expect(isSafeUrl('mailto:x@y.z')).toBe(true);
    expect(isSafeUrl('javascript:alert(1)')).toBe(false);
    expect(isSafeUrl('java\tscript:alert(1)')).toBe(false);
    expect(isSafeUrl('file:///etc/passwd')).toBe(false);
    expect(isSafeUrl('/relative')).toBe(false);
  });
});
