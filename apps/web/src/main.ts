// The dashboard: sign-in with a pasted key, then the portfolio (#/), the alarm list (#/alarms),
// one venue (#/venues/<id>, live over /ws), setup (#/setup, #/venues/<id>/setup).
// docs/web.md describes every figure's source; docs/dashboard.md is for the person using it.

import './style.css';
import { api, session, setUnauthorizedHandler, type ApiError } from './api.js';
import { fill, h } from './dom.js';
import { BROWSER_TZ, setTimeMode, timeMode } from './format.js';
import { alarmListView } from './alarm-list.js';
import { portfolioView } from './portfolio.js';
import { setupView, venueSetupView } from './setup.js';
import { signInView, venueView, type Notice, type View, type ViewContext } from './views.js';
import { LiveSocket, type LiveState } from './ws.js';

const app = document.getElementById('app')!;
const banner = document.getElementById('banner')!;
const liveStatus = document.getElementById('live-status')!;
const signOutButton = document.getElementById('sign-out') as HTMLButtonElement;
const nav = document.getElementById('nav')!;

let live: LiveSocket | null = null;
let liveState: LiveState = { kind: 'connecting' };
let view: View | null = null;
let refreshTimer: ReturnType<typeof setTimeout> | undefined;

function showLiveState(s: LiveState): void {
  liveState = s;
  liveStatus.hidden = false;
  liveStatus.dataset.state = s.kind;
  liveStatus.textContent =
    s.kind === 'live'
      ? 'Live'
      : s.kind === 'connecting'
        ? 'Connecting to live updates…'
        : s.kind === 'retrying'
          ? `Live updates lost (${s.why}); reconnecting${s.inSeconds ? ` in ${s.inSeconds} s` : ''}…`
          : `Live updates stopped: ${s.why}`;
  view?.onLiveState?.(s);
}

function signOut(notice?: Notice): void {
  session.signOut();
  live?.close();
  live = null;
  view?.dispose?.();
  view = null;
  liveStatus.hidden = true;
  signOutButton.hidden = true;
  nav.hidden = true;
  if (location.hash) history.replaceState(null, '', location.pathname);
  render(notice);
}

setUnauthorizedHandler((err: ApiError) => signOut({ text: `Your key was refused: ${err.text}. Sign in again.`, error: true }));

function startLive(key: string): void {
  live = new LiveSocket(key, {
    onState: showLiveState,
    onOccupancy: (venueId, zoneId, occupancy, time) => view?.onOccupancy?.(venueId, zoneId, occupancy, time),
    onAlarm: (alarm) => view?.onAlarm?.(alarm),
    // One refetch for a burst of re-subscriptions (the portfolio watches every venue).
    onResubscribed: (venueId) => {
      clearTimeout(refreshTimer);
      refreshTimer = setTimeout(() => view?.refresh?.(venueId), 200);
    },
    onUnauthorized: (why) => signOut({ text: `Your key was refused by the live stream: ${why}. Sign in again.`, error: true }),
  });
}

/** After a rotation from the setup page: keep the new key, and reconnect the stream with it. */
function keyRotated(newKey: string): void {
  live?.close();
  session.signIn(newKey);
  startLive(newKey);
}

const ctx: ViewContext = { watch: (ids) => live?.watch(ids), liveState: () => liveState };

/** The links of the top bar, the current one marked. */
function renderNav(current: string): void {
  nav.hidden = false;
  const link = (href: string, text: string, key: string) => h('a', { href, 'aria-current': current === key ? 'page' : undefined }, text);
  const times = h(
    'select',
    {
      id: 'time-zone-mode',
      'aria-label': 'Show times in',
      onchange: (ev: Event) => {
        setTimeMode((ev.target as HTMLSelectElement).value as 'venue' | 'browser');
        render();
      },
    },
    h('option', { value: 'venue', selected: timeMode() === 'venue' }, 'Venue-local times'),
    h('option', { value: 'browser', selected: timeMode() === 'browser' }, `My times (${BROWSER_TZ})`),
  );
  fill(
    nav,
    link('#/', 'Overview', 'overview'),
    link('#/alarms', 'Alarms', 'alarms'),
    link('#/setup', 'Setup', 'setup'),
    h('label', { class: 'times' }, times),
  );
}

function render(notice?: Notice): void {
  banner.hidden = true;
  view?.dispose?.();
  view = null;
  const key = session.key();
  if (!key) {
    document.title = 'Sign in · Venue dashboard';
    nav.hidden = true;
    fill(
      app,
      signInView((candidate, status, button) => {
        button.disabled = true;
        status.className = 'status';
        status.textContent = 'Checking the key…';
        api.venues(candidate).then(
          () => {
            session.signIn(candidate);
            render();
          },
          (err: ApiError) => {
            button.disabled = false;
            status.className = 'status error';
            status.setAttribute('role', 'alert');
            status.textContent = `Sign-in failed: ${err.text}`;
          },
        );
      }, notice),
    );
    return;
  }
  signOutButton.hidden = false;
  if (!live) startLive(key);
  const hash = location.hash;
  let m: RegExpExecArray | null;
  live!.watch(null);
  if ((m = /^#\/venues\/([0-9a-f-]{36})\/setup$/i.exec(hash))) {
    renderNav('setup');
    view = venueSetupView(m[1]!);
  } else if ((m = /^#\/venues\/([^/?]+)$/i.exec(hash))) {
    renderNav('venue');
    view = venueView(decodeURIComponent(m[1]!), ctx);
  } else if ((m = /^#\/alarms(?:\?venue=([0-9a-f-]{36}))?$/i.exec(hash))) {
    document.title = 'Alarms · Venue dashboard';
    renderNav('alarms');
    view = alarmListView(ctx, m[1] ?? null);
  } else if (hash === '#/setup') {
    document.title = 'Setup · Venue dashboard';
    renderNav('setup');
    view = setupView(keyRotated);
  } else {
    document.title = 'Overview · Venue dashboard';
    renderNav('overview');
    view = portfolioView(ctx);
  }
  fill(app, view.root);
}

signOutButton.addEventListener('click', () => signOut({ text: 'Signed out: the key is no longer kept in this tab.', error: false }));
window.addEventListener('hashchange', () => render());
// Never a blank page: anything unexpected is said in the banner.
const fail = (what: unknown) => {
  banner.hidden = false;
  banner.textContent = `Something went wrong in the page: ${what instanceof Error ? what.message : String(what)}. Reload to try again.`;
};
window.addEventListener('error', (ev) => fail(ev.error ?? ev.message));
window.addEventListener('unhandledrejection', (ev) => fail(ev.reason));
render();
