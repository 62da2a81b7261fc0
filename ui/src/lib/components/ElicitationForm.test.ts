// An MCP server's elicitation shown as a form over the mock backend: defaults applied,
// required fields checked, accept / decline / cancel (Esc) sent as the user chose.
import { render, screen, within } from '@testing-library/svelte';
import userEvent from '@testing-library/user-event';
import { afterEach, describe, expect, it, vi } from 'vitest';
import App from '../../App.svelte';
import { MockBackend } from '../mock-backend';
import { AppState } from '../stores/app.svelte';

let backend: MockBackend | undefined;
let app: AppState | undefined;
afterEach(() => {
  app?.stop();
  backend?.dispose();
});

const schema = {
  type: 'object',
  properties: {
    name: { type: 'string', title: 'Full name' },
    color: { type: 'string', title: 'Favourite colour', enum: ['red', 'green', 'blue'], default: 'green' },
    age: { type: 'integer', title: 'Age', minimum: 0 },
    subscribe: { type: 'boolean', title: 'Subscribe', default: true },
  },
  required: ['name'],
};

async function start() {
  backend = new MockBackend({ configured: true, delayScale: 0 });
  app = new AppState(backend);
  render(App, { app });
  await app.start();
  return { backend, user: userEvent.setup() };
}

describe('elicitation form', () => {
  it('names the server, applies defaults, checks required fields, and accepts with typed content', async () => {
    const { backend, user } = await start();
    backend.elicit('e1', 'everything', 'Please tell us about yourself', schema);
    const form = await screen.findByTestId('elicitation-form');
    expect(form).toHaveTextContent('MCP · everything');
    expect(form).toHaveTextContent('Please tell us about yourself');
    expect(within(form).getByLabelText('Favourite colour')).toHaveValue('green');
    expect(within(form).getByRole('checkbox', { name: 'Subscribe' })).toBeChecked();
    await user.click(within(form).getByRole('button', { name: 'Submit' }));
    expect(within(form).getByRole('alert')).toHaveTextContent('Full name is required.');
    expect(backend.elicitationAnswers.get('e1')).toBeUndefined();
    await user.type(within(form).getByLabelText('Full name (required)'), 'Ada');
    await user.type(within(form).getByLabelText('Age'), '36');
    await user.click(within(form).getByRole('button', { name: 'Submit' }));
    await vi.waitFor(() => expect(screen.queryByTestId('elicitation-form')).toBeNull());
    expect(backend.elicitationAnswers.get('e1')).toEqual({
      action: 'accept',
      content: { name: 'Ada', color: 'green', age: 36, subscribe: true },
    });
  });

  it('Decline sends nothing; Esc cancels; forms are shown one at a time', async () => {
    const { backend, user } = await start();
    backend.elicit('e1', 'everything', 'First', schema);
    backend.elicit('e2', 'memory', 'Second', schema);
    let form = await screen.findByTestId('elicitation-form');
    expect(form).toHaveTextContent('First');
    await user.click(within(form).getByRole('button', { name: 'Decline' }));
    await vi.waitFor(() => expect(screen.getByTestId('elicitation-form')).toHaveTextContent('Second'));
    expect(backend.elicitationAnswers.get('e1')).toEqual({ action: 'decline', content: null });
    form = screen.getByTestId('elicitation-form');
    await user.click(within(form).getByLabelText('Full name (required)'));
    await user.keyboard('{Escape}');
    await vi.waitFor(() => expect(screen.queryByTestId('elicitation-form')).toBeNull());
    expect(backend.elicitationAnswers.get('e2')).toEqual({ action: 'cancel', content: null });
  });

  it('single and multiple selects with titles (oneOf/anyOf, enumNames) send their values', async () => {
    const { backend, user } = await start();
    backend.elicit('e3', 'everything', 'Pick', {
      type: 'object',
      properties: {
        hero: { type: 'string', title: 'Hero', oneOf: [{ const: 'hero-1', title: 'Superman' }, { const: 'hero-2', title: 'Green Lantern' }], default: 'hero-1' },
        pet: { type: 'string', title: 'Pet', enum: ['pet-1', 'pet-2'], enumNames: ['Cats', 'Dogs'], default: 'pet-1' },
        fish: { type: 'array', title: 'Fish', items: { anyOf: [{ const: 'fish-1', title: 'Tuna' }, { const: 'fish-2', title: 'Salmon' }] }, default: ['fish-1'] },
        tools: { type: 'array', title: 'Instruments', items: { type: 'string', enum: ['Guitar', 'Piano'] }, default: ['Guitar'] },
      },
    });
    const form = await screen.findByTestId('elicitation-form');
    await user.selectOptions(within(form).getByLabelText('Hero'), 'Green Lantern');
    await user.selectOptions(within(form).getByLabelText('Pet'), 'Dogs');
    await user.click(within(form).getByRole('checkbox', { name: 'Salmon' }));
    await user.click(within(form).getByRole('checkbox', { name: 'Guitar' }));
    await user.click(within(form).getByRole('button', { name: 'Submit' }));
    await vi.waitFor(() => expect(backend.elicitationAnswers.get('e3')).toEqual({
      action: 'accept',
      content: { hero: 'hero-2', pet: 'pet-2', fish: ['fish-1', 'fish-2'], tools: [] },
    }));
  });

  it('a form closed by the backend (timed out, server gone) disappears', async () => {
    const { backend } = await start();
    backend.elicit('e9', 'everything', 'Too late', schema);
    await screen.findByTestId('elicitation-form');
    backend.emit({ type: 'elicitation_closed', data: { id: 'e9' } });
    await vi.waitFor(() => expect(screen.queryByTestId('elicitation-form')).toBeNull());
  });

  it('URL mode: shows the full link and its host; Open link opens it and accepts; Decline sends decline', async () => {
    const { backend, user } = await start();
    backend.elicit('u1', 'payments', 'Confirm the payment on the provider\'s page', {}, 'https://pay.example.com/confirm?id=42');
    const form = await screen.findByTestId('elicitation-form');
    expect(form).toHaveTextContent('MCP · payments');
    expect(form).toHaveTextContent('asks you to open a link');
    expect(within(form).getByTestId('elicitation-url')).toHaveTextContent('https://pay.example.com/confirm?id=42');
    expect(within(form).getByTestId('elicitation-host')).toHaveTextContent('pay.example.com');
    // Nothing is opened until the user says so.
    expect(backend.calls.some((c) => c.cmd === 'chat_open_link')).toBe(false);
    await user.click(within(form).getByRole('button', { name: 'Open link' }));
    await vi.waitFor(() => expect(backend.elicitationAnswers.get('u1')).toEqual({ action: 'accept', content: null }));
    expect(backend.calls).toContainEqual({ cmd: 'chat_open_link', args: { url: 'https://pay.example.com/confirm?id=42' } });

    backend.elicit('u2', 'payments', 'Again', {}, 'https://pay.example.com/again');
    const again = await screen.findByTestId('elicitation-form');
    await user.click(within(again).getByRole('button', { name: 'Decline' }));
    await vi.waitFor(() => expect(backend.elicitationAnswers.get('u2')).toEqual({ action: 'decline', content: null }));
    expect(backend.calls.filter((c) => c.cmd === 'chat_open_link')).toHaveLength(1);
  });
});
