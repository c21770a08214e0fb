/*
 * The shopper page's service worker: it shows the reminder of a turn to
 * buy that the server pushed (notify/remind/README.md) while the page was
 * closed, and a click on it focuses the page, or opens it on the sale.
 *
 * A push's data is JSON: {title, body, url, voucher_id, until}.
 */
'use strict';

self.addEventListener('install', () => self.skipWaiting());
self.addEventListener('activate', (event) => event.waitUntil(self.clients.claim()));

self.addEventListener('push', (event) => {
  let data = {};
  try {
    data = event.data ? event.data.json() : {};
  } catch (e) {
    data = { body: event.data ? event.data.text() : '' };
  }
  const title = data.title || 'Your turn to buy';
  event.waitUntil(self.registration.showNotification(title, {
    body: data.body || '',
    // One notification per sale: a later reminder replaces it.
    tag: `turn-${data.voucher_id || ''}`,
    renotify: true,
    requireInteraction: true,
    data: { url: data.url || './', voucherId: data.voucher_id || '', until: data.until || '' },
  }));
});

self.addEventListener('notificationclick', (event) => {
  event.notification.close();
  const target = new URL((event.notification.data && event.notification.data.url) || './', self.registration.scope);
  event.waitUntil((async () => {
    const open = await self.clients.matchAll({ type: 'window', includeUncontrolled: true });
    for (const c of open) {
      if (new URL(c.url).origin !== target.origin) continue;
      // The page already open: bring it forward, on the sale.
      const focused = await c.focus();
      if (focused && 'navigate' in focused && focused.url !== target.href) {
        try { await focused.navigate(target.href); } catch (e) { /* not controlled yet: it stays where it is */ }
      }
      return;
    }
    await self.clients.openWindow(target.href);
  })());
});
