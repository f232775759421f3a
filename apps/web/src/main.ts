// The dashboard: sign-in with a pasted key, then #/ (venues, connector health) and
// #/venues/<id> (one venue, live over /ws). docs/web.md describes every figure's source.

import './style.css';
import { api, session, setUnauthorizedHandler, type ApiError } from './api.js';
import { fill } from './dom.js';
import { overviewView, signInView, venueView, type Notice, type VenueView } from './views.js';
import { LiveSocket, type LiveState } from './ws.js';

const app = document.getElementById('app')!;
const banner = document.getElementById('banner')!;
const liveStatus = document.getElementById('live-status')!;
const signOutButton = document.getElementById('sign-out') as HTMLButtonElement;

let live: LiveSocket | null = null;
let view: VenueView | null = null;

function showLiveState(s: LiveState): void {
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
}

function signOut(notice?: Notice): void {
  session.signOut();
  live?.close();
  live = null;
  view?.dispose();
  view = null;
  liveStatus.hidden = true;
  signOutButton.hidden = true;
  if (location.hash) history.replaceState(null, '', location.pathname);
  render(notice);
}

setUnauthorizedHandler((err: ApiError) => signOut({ text: `Your key was refused: ${err.text}. Sign in again.`, error: true }));

function startLive(key: string): void {
  live = new LiveSocket(key, {
    onState: showLiveState,
    onOccupancy: (venueId, zoneId, occupancy, time) => view?.onOccupancy(zoneId, occupancy, time),
    onAlarm: (alarm) => view?.onAlarm(alarm),
    onResubscribed: () => view?.refresh(),
    onUnauthorized: (why) => signOut({ text: `Your key was refused by the live stream: ${why}. Sign in again.`, error: true }),
  });
}

function render(notice?: Notice): void {
  banner.hidden = true;
  view?.dispose();
  view = null;
  const key = session.key();
  if (!key) {
    document.title = 'Sign in · Venue dashboard';
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
  const m = /^#\/venues\/([0-9a-f-]{36})$/i.exec(location.hash);
  if (m) {
    view = venueView(m[1]!);
    live!.watch(m[1]!);
    fill(app, view.root);
  } else {
    document.title = 'Venues · Venue dashboard';
    live!.watch(null);
    fill(app, overviewView());
  }
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
