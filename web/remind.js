/*
 * "Remind me": the shopper asks to be told when their turn to buy comes
 * while this page is closed (notify/remind/README.md), by a notification
 * of this browser (Web Push through sw.js) and by e-mail. Self-contained:
 * it reads the session app.js keeps (sessionStorage "seckill.session") and
 * shows #remind-section while someone is signed in (#account-bar shown).
 *
 * It speaks the page's language (<html lang>, which app.js sets) and
 * asks for the reminders in it.
 *
 * Hooks: #remind-section, #remind-push, #remind-push-off, #remind-email,
 * #remind-email-form, #remind-email-save, #remind-email-off, #remind-status.
 */
'use strict';
(() => {
  const SESSION_KEY = 'seckill.session';
  const $ = (id) => document.getElementById(id);
  // The page's language (app.js sets <html lang>): the texts here, and the
  // language the reminders are written in (sent as Accept-Language).
  const WORDS = {
    en: {
      title: 'Remind me when my turn comes',
      intro: 'If this page is closed when your turn to buy comes, we tell you, with the sale and the time your turn ends.',
      push: 'Notify me in this browser', pushOff: 'Stop notifying this browser',
      emailLabel: 'E-mail address for reminders', save: 'Save address', forget: 'Forget my address',
      on: 'This browser will notify you when your turn comes.', off: 'This browser will no longer notify you.',
      denied: 'Notifications are blocked: allow them in the site settings.', unsupported: 'This browser cannot show push notifications.',
      saved: 'We will e-mail you when your turn comes (the address is not verified).', removed: 'Your address is forgotten.',
      failed: 'That did not work; try again in a moment.',
    },
    zh: {
      title: '轮到我时提醒我',
      intro: '轮到您购买时如果此页面已关闭，我们会通知您活动名称和您的购买截止时间。',
      push: '在此浏览器中通知我', pushOff: '停止在此浏览器中通知',
      emailLabel: '接收提醒的邮箱地址', save: '保存地址', forget: '删除我的地址',
      on: '轮到您时，本浏览器会通知您。', off: '本浏览器不再通知您。',
      denied: '通知已被浏览器阻止：请在网站设置中允许通知。', unsupported: '此浏览器无法显示推送通知。',
      saved: '轮到您时我们会发送邮件（地址未经验证）。', removed: '已删除您的邮箱地址。',
      failed: '操作失败，请稍后再试。',
    },
  };
  const lang = () => ((document.documentElement.lang || '').toLowerCase().startsWith('zh') ? 'zh' : 'en');
  const words = new Proxy({}, { get: (_, key) => WORDS[lang()][key] });

  function translate() {
    const texts = { 'remind-title': 'title', 'remind-intro': 'intro', 'remind-push': 'push', 'remind-push-off': 'pushOff',
      'remind-email-save': 'save', 'remind-email-off': 'forget' };
    for (const [id, key] of Object.entries(texts)) $(id).textContent = words[key];
    document.querySelector('label[for="remind-email"]').textContent = words.emailLabel;
  }

  function token() {
    try {
      const s = JSON.parse(sessionStorage.getItem(SESSION_KEY) || 'null');
      return s && s.token ? s.token : '';
    } catch (e) { return ''; }
  }

  function say(text) { $('remind-status').textContent = text; }

  async function api(method, path, body) {
    const headers = { Authorization: `Bearer ${token()}`, 'Accept-Language': lang() === 'zh' ? 'zh-CN' : 'en' };
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    const res = await fetch(`/api/v1${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    const data = await res.json().catch(() => ({}));
    if (!res.ok) throw new Error((data.error && data.error.message) || res.statusText);
    return data;
  }

  function pushSupported() {
    return 'serviceWorker' in navigator && 'PushManager' in window && 'Notification' in window;
  }

  function keyBytes(b64url) {
    const b64 = b64url.replace(/-/g, '+').replace(/_/g, '/') + '='.repeat((4 - (b64url.length % 4)) % 4);
    return Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  }

  async function registration() {
    return navigator.serviceWorker.register('sw.js');
  }

  async function pushOn() {
    if (!pushSupported()) { say(words.unsupported); return; }
    try {
      const { public_key: key } = await api('GET', '/push/key');
      if (await Notification.requestPermission() !== 'granted') { say(words.denied); return; }
      const reg = await registration();
      await navigator.serviceWorker.ready;
      let sub = await reg.pushManager.getSubscription();
      if (!sub) sub = await reg.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: keyBytes(key) });
      await api('POST', '/push/subscriptions', sub.toJSON());
      say(words.on);
      showPush(true);
    } catch (e) { say(`${words.failed} ${e.message || ''}`.trim()); }
  }

  async function pushOff() {
    try {
      const reg = await navigator.serviceWorker.getRegistration();
      const sub = reg && await reg.pushManager.getSubscription();
      if (sub) {
        await api('DELETE', `/push/subscriptions?endpoint=${encodeURIComponent(sub.endpoint)}`);
        await sub.unsubscribe();
      }
      say(words.off);
      showPush(false);
    } catch (e) { say(`${words.failed} ${e.message || ''}`.trim()); }
  }

  function showPush(on) {
    $('remind-push').hidden = on;
    $('remind-push-off').hidden = !on;
  }

  async function emailSave(event) {
    event.preventDefault();
    const field = $('remind-email');
    if (!field.checkValidity()) { field.reportValidity(); return; }
    try {
      await api('PUT', '/reminders/email', { address: field.value.trim() });
      say(words.saved);
    } catch (e) { say(`${words.failed} ${e.message || ''}`.trim()); }
  }

  async function emailOff() {
    try {
      await api('DELETE', '/reminders/email');
      $('remind-email').value = '';
      say(words.removed);
    } catch (e) { say(`${words.failed} ${e.message || ''}`.trim()); }
  }

  async function follow() {
    const signedIn = !$('account-bar').hidden && token() !== '';
    $('remind-section').hidden = !signedIn;
    if (!signedIn || !pushSupported()) return;
    const reg = await navigator.serviceWorker.getRegistration();
    const sub = reg && await reg.pushManager.getSubscription();
    showPush(Boolean(sub) && Notification.permission === 'granted');
  }

  function start() {
    if (!$('remind-section')) return;
    if (pushSupported()) registration().catch(() => { /* no worker: push stays off */ });
    $('remind-push').addEventListener('click', pushOn);
    $('remind-push-off').addEventListener('click', pushOff);
    $('remind-email-form').addEventListener('submit', emailSave);
    $('remind-email-off').addEventListener('click', emailOff);
    new MutationObserver(() => { follow(); }).observe($('account-bar'), { attributes: true, attributeFilter: ['hidden'] });
    new MutationObserver(translate).observe(document.documentElement, { attributes: true, attributeFilter: ['lang'] });
    translate();
    follow();
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
