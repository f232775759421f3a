import type { ConnectorType } from '../lib/events/vocabulary.js';
import type { Profile } from './curve.js';

/**
 * The venues the simulator creates: one per time zone, each with a realistic mix of hardware (one
 * Wi-Fi vendor, a door counter, Square at the tills, sometimes a captive portal). The first four
 * together carry all seven connector types.
 */

export type ZoneType = 'entrance' | 'exit' | 'area' | 'counter';

export interface ZoneSpec {
  slug: string;
  name: string;
  type: ZoneType;
  capacity: number;
  /** For `area` zones: the share of visitors who spend their visit there. */
  share?: number;
}

export interface VenueTemplate {
  /** Stable key: seeds the venue's randomness and finds it again on a later run. */
  key: string;
  name: string;
  timezone: string;
  address: string;
  lat: number;
  lng: number;
  profile: Profile;
  /** Visitors on an average day at scale 1 (the weekday curve moves it). */
  visitorsPerDay: number;
  /** Median visit length in minutes (log-normal). */
  dwellMinutes: number;
  currency: string;
  /** Median basket in minor units of the currency. */
  basketMinor: number;
  /** Share of visits that pay. */
  buyShare: number;
  ssid: string;
  zones: readonly ZoneSpec[];
  connectors: readonly ConnectorType[];
}

/** A venue as the generators see it: the template plus the ids the API gave. */
export interface SimVenue extends VenueTemplate {
  id: string;
  /** Integration id per connector type (heartbeats name it). */
  integrations: Partial<Record<ConnectorType, string>>;
}

export const VENUE_TEMPLATES: readonly VenueTemplate[] = [
  {
    key: 'berlin',
    name: 'Alexanderplatz Flagship Store',
    timezone: 'Europe/Berlin',
    address: 'Alexanderplatz 1, 10178 Berlin',
    lat: 52.5219,
    lng: 13.4132,
    profile: 'retail',
    visitorsPerDay: 900,
    dwellMinutes: 28,
    currency: 'EUR',
    basketMinor: 4800,
    buyShare: 0.3,
    ssid: 'Flagship Guest',
    zones: [
      { slug: 'entrance', name: 'Main entrance', type: 'entrance', capacity: 350 },
      { slug: 'sales-floor', name: 'Sales floor', type: 'area', capacity: 250, share: 0.85 },
      { slug: 'fitting-rooms', name: 'Fitting rooms', type: 'area', capacity: 24, share: 0.15 },
      { slug: 'checkout', name: 'Checkout', type: 'counter', capacity: 30 },
    ],
    connectors: ['meraki', 'density', 'square', 'mywifi'],
  },
  {
    key: 'new-york',
    name: 'Chelsea Food Hall',
    timezone: 'America/New_York',
    address: '75 9th Ave, New York, NY 10011',
    lat: 40.7424,
    lng: -74.0061,
    profile: 'foodhall',
    visitorsPerDay: 1000,
    dwellMinutes: 40,
    currency: 'USD',
    basketMinor: 1800,
    buyShare: 0.7,
    ssid: 'Food Hall Free WiFi',
    zones: [
      { slug: 'main-entrance', name: 'Main entrance', type: 'entrance', capacity: 600 },
      { slug: 'east-exit', name: 'East exit', type: 'exit', capacity: 600 },
      { slug: 'dining-hall', name: 'Dining hall', type: 'area', capacity: 400, share: 0.8 },
      { slug: 'market', name: 'Market', type: 'area', capacity: 120, share: 0.2 },
      { slug: 'counters', name: 'Food counters', type: 'counter', capacity: 60 },
    ],
    connectors: ['aruba', 'verkada', 'square'],
  },
  {
    key: 'tokyo',
    name: 'Shibuya Coffee Roasters',
    timezone: 'Asia/Tokyo',
    address: '2-21-1 Shibuya, Tokyo 150-0002',
    lat: 35.659,
    lng: 139.7037,
    profile: 'cafe',
    visitorsPerDay: 450,
    dwellMinutes: 45,
    currency: 'JPY',
    basketMinor: 950,
    buyShare: 0.85,
    ssid: 'Roasters WiFi',
    zones: [
      { slug: 'entrance', name: 'Entrance', type: 'entrance', capacity: 80 },
      { slug: 'seating', name: 'Seating', type: 'area', capacity: 60, share: 1 },
      { slug: 'bar-counter', name: 'Bar counter', type: 'counter', capacity: 12 },
    ],
    connectors: ['unifi', 'density', 'square', 'mywifi'],
  },
  {
    key: 'sydney',
    name: 'Harbour Bar & Kitchen',
    timezone: 'Australia/Sydney',
    address: '1 Macquarie St, Sydney NSW 2000',
    lat: -33.8587,
    lng: 151.214,
    profile: 'bar',
    visitorsPerDay: 600,
    dwellMinutes: 95,
    currency: 'AUD',
    basketMinor: 3200,
    buyShare: 0.65,
    ssid: 'Harbour Guests',
    zones: [
      { slug: 'entrance', name: 'Entrance', type: 'entrance', capacity: 300 },
      { slug: 'bar-floor', name: 'Bar floor', type: 'area', capacity: 180, share: 0.7 },
      { slug: 'terrace', name: 'Terrace', type: 'area', capacity: 80, share: 0.3 },
      { slug: 'bar', name: 'Bar', type: 'counter', capacity: 20 },
    ],
    connectors: ['meraki', 'verkada', 'square'],
  },
  {
    key: 'london',
    name: 'Covent Garden Market Store',
    timezone: 'Europe/London',
    address: '14 James St, London WC2E 8BU',
    lat: 51.5117,
    lng: -0.1233,
    profile: 'retail',
    visitorsPerDay: 700,
    dwellMinutes: 25,
    currency: 'GBP',
    basketMinor: 3900,
    buyShare: 0.35,
    ssid: 'Market Store WiFi',
    zones: [
      { slug: 'entrance', name: 'Entrance', type: 'entrance', capacity: 250 },
      { slug: 'shop-floor', name: 'Shop floor', type: 'area', capacity: 180, share: 1 },
      { slug: 'tills', name: 'Tills', type: 'counter', capacity: 20 },
    ],
    connectors: ['aruba', 'verkada', 'square', 'mywifi'],
  },
  {
    key: 'los-angeles',
    name: 'Venice Beach Taproom',
    timezone: 'America/Los_Angeles',
    address: '1600 Ocean Front Walk, Venice, CA 90291',
    lat: 33.9875,
    lng: -118.4727,
    profile: 'bar',
    visitorsPerDay: 500,
    dwellMinutes: 80,
    currency: 'USD',
    basketMinor: 2600,
    buyShare: 0.7,
    ssid: 'Taproom Guest',
    zones: [
      { slug: 'entrance', name: 'Entrance', type: 'entrance', capacity: 200 },
      { slug: 'taproom', name: 'Taproom', type: 'area', capacity: 150, share: 1 },
      { slug: 'bar', name: 'Bar', type: 'counter', capacity: 16 },
    ],
    connectors: ['unifi', 'density', 'square'],
  },
  {
    key: 'singapore',
    name: 'Marina Hawker Centre',
    timezone: 'Asia/Singapore',
    address: '8 Raffles Ave, Singapore 039802',
    lat: 1.2897,
    lng: 103.8572,
    profile: 'foodhall',
    visitorsPerDay: 1500,
    dwellMinutes: 35,
    currency: 'SGD',
    basketMinor: 900,
    buyShare: 0.8,
    ssid: 'Hawker Free WiFi',
    zones: [
      { slug: 'entrance', name: 'Entrance', type: 'entrance', capacity: 700 },
      { slug: 'food-court', name: 'Food court', type: 'area', capacity: 500, share: 1 },
      { slug: 'stalls', name: 'Stalls', type: 'counter', capacity: 80 },
    ],
    connectors: ['meraki', 'verkada', 'square', 'mywifi'],
  },
  {
    key: 'sao-paulo',
    name: 'Paulista Café',
    timezone: 'America/Sao_Paulo',
    address: 'Av. Paulista 1578, São Paulo',
    lat: -23.5614,
    lng: -46.6559,
    profile: 'cafe',
    visitorsPerDay: 400,
    dwellMinutes: 40,
    currency: 'BRL',
    basketMinor: 2800,
    buyShare: 0.85,
    ssid: 'Paulista WiFi',
    zones: [
      { slug: 'entrance', name: 'Entrance', type: 'entrance', capacity: 90 },
      { slug: 'salon', name: 'Salon', type: 'area', capacity: 70, share: 1 },
      { slug: 'counter', name: 'Counter', type: 'counter', capacity: 10 },
    ],
    connectors: ['meraki', 'density', 'square', 'mywifi'],
  },
];

export const MAX_VENUES = VENUE_TEMPLATES.length;

/** Obviously fake connector configs (valid for domain/integrations/config-schemas.ts). */
export function integrationConfig(type: ConnectorType, venue: VenueTemplate): Record<string, unknown> {
  const tag = `sim-${venue.key}`;
  switch (type) {
    case 'meraki':
      return { api_key: `${tag}-fake-meraki-api-key`, org_id: '549236', webhook_secret: `${tag}-fake-scanning-secret` };
    case 'aruba':
      return {
        mode: 'central',
        base_url: 'https://apigw-simulated.central.arubanetworks.example',
        customer_id: `${tag}-customer`,
        client_id: `${tag}-client`,
        client_secret: `${tag}-fake-client-secret`,
        streaming_key: `${tag}-fake-streaming-key`,
      };
    case 'unifi':
      return {
        controller_url: 'https://unifi.simulated.example:8443',
        username: 'sim-readonly',
        password: `${tag}-fake-password`,
        site: 'default',
      };
    case 'mywifi':
      return { dashboard_subdomain: `sim-${venue.key}`, app_secret: `${tag}-fake-app-secret` };
    case 'square':
      return {
        location_id: squareLocation(venue),
        access_token: `${tag}-fake-square-token`,
        webhook_signature_key: `${tag}-fake-signature-key`,
        notification_url: 'https://hooks.simulated.example/square',
        environment: 'sandbox',
      };
    case 'density':
      return {
        api_token: `${tag}-fake-density-token`,
        space_ids: [densitySpace(venue)],
        webhook_header_name: 'X-Sim-Webhook',
        webhook_header_value: `${tag}-fake-header-value`,
      };
    case 'verkada':
      return { org_id: `${tag}-org`, api_key: `${tag}-fake-verkada-key`, webhook_secret: `${tag}-fake-webhook-secret`, region: 'us' };
  }
}

export const squareLocation = (v: VenueTemplate) =>
  `LSIM${v.key
    .replace(/[^a-z]/g, '')
    .toUpperCase()
    .slice(0, 8)}`;
export const densitySpace = (v: VenueTemplate) => `spc_sim${v.key.replace(/[^a-z]/g, '')}`;
export const areaZones = (v: VenueTemplate) => v.zones.filter((z) => z.type === 'area');
export const doorZones = (v: VenueTemplate) => v.zones.filter((z) => z.type === 'entrance' || z.type === 'exit');
export const counterZone = (v: VenueTemplate) => v.zones.find((z) => z.type === 'counter');
