/*
 * Flash Sale shopper page. Plain JavaScript, no build step, no network access
 * beyond this site's own /api/v1 (gateway/openapi.yaml) and /api/v1/ws.
 *
 * Hooks for tests (chromedp) and for anyone scripting the page. They are a
 * contract: keep them stable.
 *
 *   #message                    the status line (aria-live); data-kind = info|ok|warn|error
 *   #lang                       the language switch (en|zh-CN); the choice is kept in
 *                               localStorage, sets <html lang>, and goes to the API as
 *                               Accept-Language on every request
 *   #username #password         log-in form fields
 *   #login #register            buttons (register logs in right after)
 *   #login-captcha              shown once a login needs a captcha (its username had many
 *                               failed logins), or a sign-up does (the server asks for one):
 *                               #login-captcha-why #login-captcha-img #login-captcha-answer
 *                               #login-captcha-refresh
 *   #auth                       the log-in card (hidden once logged in)
 *   #account-bar #whoami #logout  shown once logged in
 *   #server-clock               server time, from the Date header of API answers
 *   #vouchers                   the voucher list: live (and paused) sales first, then
 *                               upcoming, then sold out and ended, each group newest first
 *     [data-voucher-id="<id>"]  one card (data-testid="voucher"); data-state =
 *                               upcoming|live|paused|soldout|ended; data-notice = busy while
 *                               the shop asked to wait (503), else absent
 *       .price                  the price, by Intl in the page's language and the voucher's currency
 *       .card-notice            the card's own status line (aria-live): a refusal of this
 *                               card's buy or join and what to do next; data-kind as #message
 *       .card-retry             the time left before Buy comes back after a 429 or 503
 *       .stock-left .stock-total  live stock figures
 *       .countdown              "Opens in …" / "Ends in …"
 *       .qty                    quantity input (id qty-<voucher id>)
 *       .captcha                shown when the voucher has captcha_required
 *         .captcha-img .captcha-answer .captcha-refresh   (answer id captcha-<voucher id>)
 *         .captcha-listen .captcha-audio                  the same captcha read aloud
 *       .pow-status             a pow voucher's check in progress (pow.js, a Web Worker); a
 *                               polite live region, empty (and out of sight) when idle
 *       .buy                    the Buy button (disabled while a request is in flight,
 *                               while waiting out a 429, when sold out or not on sale;
 *                               on a voucher with a waiting room, shown only once admitted)
 *       .queue                  the waiting room (vouchers with waiting_room); data-state =
 *                               none|waiting|sold_out|admitted|held|used|expired|closed, and
 *                               in a draw (waiting_room.mode "draw")
 *                               none|entered|won|held|used|expired|waitlisted|lost|void
 *                               (held: a missed turn kept until held_until, in both)
 *         .queue-headline .queue-position .queue-ahead .queue-eta .queue-bar
 *       .join                   "Join the line" (shown until the shopper is in line)
 *       .take                   "Take my turn", shown while a turn is held: reads the
 *                               queue again, then buys with the fresh pass
 *   #orders-section             "My orders", shown once logged in; #orders-empty when none
 *   #orders                     the order list, newest first
 *     [data-order-id="<id>"]    one order (data-testid="order"); data-status = the API's status
 *       .status                 the status in the page's language (in English the API's
 *                               word: reserved|created|paid|cancelled|failed|refunded)
 *       .deadline               time left to pay (server clock)
 *       .pay .cancel            buttons, shown while the order is "created"
 *   #ws-state                   socket state; data-state = offline|connecting|live|reconnecting
 *
 * The log-in token is kept in sessionStorage (this tab only, gone when it closes).
 *
 * It stays one file on purpose: the page has no build step, and its sections
 * (marked "----" below: state, server clock, HTTP, session, vouchers, orders,
 * socket) share one closure's state, which separate scripts would have to
 * put on window. Read it by section; the Card class is one voucher's article.
 */
// @ts-check
'use strict';

(() => {
  const API = '/api/v1';
  const SESSION_KEY = 'seckill.session';
  // Status words of the API, ranked: a status never moves back down, whatever
  // order the socket, the snapshot and REST answers arrive in.
  // refunded comes after paid or cancelled (the money went back), so a late
  // "cancelled" never hides it.
  const RANK = { reserved: 0, created: 1, paid: 2, cancelled: 2, failed: 2, refunded: 3 };

  const $ = (sel, root = document) => root.querySelector(sel);
  // setText skips writes that change nothing: the clock ticks four times a
  // second and most of the page stays the same.
  const setText = (el, text) => { if (el.textContent !== text) el.textContent = text; };

  // ---- Language -------------------------------------------------------------
  // Every sentence of the page, in English and in Simplified Chinese. A value
  // is a string or a function of the figures it names; the static markup of
  // index.html names its sentences with data-i18n attributes (see
  // translateStatic). English is the fallback for a key a language lacks.

  const LANG_KEY = 'seckill.lang';
  const LANGS = ['en', 'zh-CN'];

  /** @typedef {string | ((...a: any[]) => string)} Msg */
  /** @type {Record<string, Record<string, Msg>>} */
  const MESSAGES = {
    en: {
      pageTitle: 'Flash Sale',
      skip: 'Skip to the vouchers',
      brand: 'Flash Sale',
      clockTitle: 'Countdowns follow the server’s clock, not this device’s',
      serverTime: 'Server time',
      signedInAs: 'Signed in as',
      logout: 'Log out',
      langLabel: 'Language',
      authTitle: 'Log in to buy',
      authHint: 'New here? Pick a username and a password, then press “Create account”.',
      username: 'Username',
      password: 'Password',
      login: 'Log in',
      register: 'Create account',
      loginWhy: 'Many wrong passwords were tried for this username: type the characters in the picture to log in.',
      registerWhy: 'Creating an account takes a captcha: type the characters in the picture, then press Create account.',
      captchaAlt: 'Captcha picture: type the characters you see',
      captchaAudio: 'Captcha read aloud: type the digits you hear',
      captchaChars: 'Characters in the picture',
      captchaDigits: 'Digits you hear',
      captchaLoading: 'Loading the picture…',
      captchaPicFail: 'The picture could not be loaded. Press “New picture”.',
      newPicture: 'New picture',
      showPicture: 'Show a picture',
      listenInstead: 'Listen instead',
      listenNew: 'Listen to a new one',
      ordersTitle: 'My orders',
      ordersEmpty: 'No orders yet. Pick a voucher below.',
      vouchersTitle: 'On sale',
      vouchersLoading: 'Loading the vouchers…',
      vouchersLoadFail: 'Couldn’t load the vouchers. Trying again…',
      nothingOnSale: 'Nothing on sale right now. Check back soon.',
      vouchersLive: 'Live',
      updatedAt: (time) => `Updated ${time}`,
      footer: 'Prices and times come from the server. Order status updates live; there is no need to reload.',
      wsOffline: 'Offline',
      wsConnecting: 'Connecting…',
      wsLive: 'Live',
      wsReconnecting: (s) => `Reconnecting in ${s} s`,
      yourPlace: 'Your place',
      peopleAhead: 'People ahead',
      estWait: 'Estimated wait',
      lineProgress: 'Progress in the line',
      quantity: 'Quantity',
      joinLine: 'Join the line',
      joining: 'Joining…',
      enterDraw: 'Enter the draw',
      entering: 'Entering…',
      buy: 'Buy',
      buying: 'Buying…',
      waitSecs: (s) => `Wait ${s} s`,
      reservedDone: 'Reserved ✓',
      notOpen: 'Not open yet',
      soldOut: 'Sold out',
      pausedBtn: 'Paused',
      saleEnded: 'Sale ended',
      logInToBuy: 'Log in to buy',
      pay: 'Pay',
      cancel: 'Cancel',
      kind_seckill: 'Flash sale',
      kind_limit: 'Limited',
      kind_common: 'Regular',
      stockText: '{left} of {total} left',
      stockAria: (left, total) => `${left} of ${total} left`,
      limitEach: (n) => `· up to ${n} each`,
      opensIn: (d) => `Opens in ${d}`,
      liveEnds: (d) => `On sale · ends in ${d}`,
      pausedText: 'Paused by the shop · back soon',
      endedAt: (when) => `Ended ${when}`,
      days: (d, rest) => `${d}d ${rest}`,
      retryIn: (s) => `You can try again in ${s} s.`,
      retryNow: 'You can try again now.',
      tryingAgain: 'Trying again now…',
      // Orders.
      status_reserved: 'reserved',
      status_created: 'created',
      status_paid: 'paid',
      status_cancelled: 'cancelled',
      status_failed: 'failed',
      status_refunded: 'refunded',
      hint_reserved: 'Confirming your order…',
      hint_paid: 'Paid. Enjoy!',
      hint_cancelled: 'Cancelled, stock returned.',
      hint_failed: 'Could not be completed, nothing was charged.',
      hint_refunded: 'Refunded: the money went back to you.',
      news_created: (ref) => `Order ${ref} is confirmed. Please pay before the timer runs out.`,
      news_paid: (ref) => `Order ${ref} is paid.`,
      news_cancelled: (ref) => `Order ${ref} was cancelled.`,
      news_failed: (ref) => `Order ${ref} could not be completed; the stock was returned.`,
      news_refunded: (ref) => `Order ${ref} was refunded; the money went back to you.`,
      orderRef: (ref) => `Order ${ref}`,
      orderQty: (n) => `${n} ×`,
      voucherN: (id) => `Voucher ${id}`,
      payOrder: (ref) => `Pay order ${ref}`,
      cancelOrder: (ref) => `Cancel order ${ref}`,
      waitingPayment: 'Waiting for payment',
      payRunOut: 'Time to pay has run out',
      payWithin: (d) => `Pay within ${d}`,
      paidThanks: (ref) => `Order ${ref} is paid. Thank you!`,
      cancelledBack: (ref) => `Order ${ref} is cancelled; the stock went back on sale.`,
      // Session.
      sessionEnded: 'Your session has ended. Please log in again.',
      loggedOut: 'You are logged out.',
      needCreds: 'Please enter a username and a password.',
      welcomeBack: (name) => `Welcome back, ${name}.`,
      accountCreated: (name) => `Account created. Welcome, ${name}!`,
      captchaLoadFail: (why) => `The captcha could not be loaded. ${why}`,
      loginCaptchaAsk: 'Many wrong passwords were tried for this username. Type the characters in the picture, then log in again.',
      // A voucher's card.
      typeCaptchaFirst: 'Please type the characters from the captcha picture first.',
      logInFirstJoin: 'Please log in first, then join the line.',
      logInFirstBuy: 'Please log in first, then press Buy again.',
      inLine: 'You’re in the line. This page shows your place live; your turn to buy comes without a reload.',
      chooseQty: (max) => `Please choose a quantity from 1 to ${max}.`,
      gotIt: (ref) => `Got it! Order ${ref} is reserved and being confirmed.`,
      yourTurn: (title) => `It’s your turn to buy “${title}”!`,
      drawLost: (title, place) => `The draw for “${title}” is made: you did not win${place ? `, and you’re number ${place} on its waitlist` : ''}.`,
      powChecking: (s) => `Checking this device for the sale… ${s} s`,
      tooManyWait: (s) => `Too many tries. Please wait ${s} s and press Buy again.`,
      networkBuy: 'Can’t reach the shop right now. Press Buy again to retry: it won’t buy twice.',
      // The waiting room.
      roomLogIn: 'This sale has a waiting room. Log in, then join the line.',
      roomOpensIn: (d) => `This sale has a waiting room. The line opens in ${d}.`,
      roomJoin: 'This sale has a waiting room: join the line for your turn to buy.',
      roomDrawn: 'You’re in the line. Places are drawn at random when the sale opens.',
      roomNumber: (n) => `You’re number ${n} in line.`,
      anyMoment: 'any moment',
      roomSoldOut: 'Sold out — you keep your place; units may come back.',
      whenUnitsBack: 'when units come back',
      roomTurn: (d) => `It’s your turn! Buy within ${d}.`,
      roomUsed: 'You used your turn.',
      roomHeld: (until, d) => `Your turn came while you were away; it is held until ${until} (${d} left).`,
      heldNotice: (title, until) => `Your turn for “${title}” came while you were away; it is held until ${until}. Press “Take my turn” to buy.`,
      takeTurn: 'Take my turn',
      takingTurn: 'Taking your turn…',
      heldNext: 'You’re back: the next unit that comes free is yours.',
      joinChallengeInvalid: 'This device’s check expired before you joined. Please press Join again.',
      regChecking: (s) => `Checking this device before creating the account… ${s} s`,
      regCheckExpired: 'This device’s check expired before the account was made. Please press Create account again.',
      roomExpired: 'Your turn passed: the pass was not used in time.',
      roomClosed: 'The line is closed: the sale is over.',
      drawLogIn: 'This sale is a draw. Log in, then enter it.',
      drawOpensIn: (d) => `This sale is a draw. Entries open in ${d}.`,
      drawEnter: (d) => `This sale is a draw: enter before it opens, in ${d}. Arriving first gives no advantage.`,
      drawClosed: 'Entries to this draw are closed.',
      drawEntered: (d) => `You’re in the draw. It is made when the sale opens, in ${d}.`,
      drawMaking: 'You’re in the draw. It is being made…',
      drawWon: (d) => `You won the draw! Buy within ${d}.`,
      drawUsed: 'You won the draw and used your turn.',
      drawVoid: 'This draw is void: its entries were lost before it was made, so nobody won it. The shop will announce a new one.',
      drawWaitlisted: (n) => `You’re number ${n} on the waitlist: units a winner does not buy come to you in draw order.`,
      drawOver: 'The draw is over for you: the sale ended, or the turn you won passed.',
      drawVoidShort: 'This draw is void: its entries were lost before it was made, so nobody won it.',
      drawEntry: (id) => ` Your entry is ${id}…;`,
      drawTicket: (ticket, cutoff) => ` Your ticket ${ticket}…, the cut-off ${cutoff}… (the lowest tickets win).`,
      drawBeacon: (round, time) => ` The draw takes its luck from drand round ${round}, due at ${time}: nobody can know it before then.`,
      drawCommitment: (c) => ` Commitment: ${c}…`,
      // Refusals (the API's error codes).
      err_network: 'Can’t reach the shop right now. Check your connection and try again.',
      err_invalid_input: (detail) => `That didn’t look right${detail ? `: ${detail}` : ''}.`,
      err_captcha_invalid: 'The captcha answer wasn’t right (or it expired). Here’s a new picture — please try again.',
      err_challenge_invalid: 'This device’s check expired before the buy reached the shop. Please press Buy again.',
      err_pow_failed: 'This browser couldn’t run the shop’s device check. Please try again, or use another browser.',
      err_not_eligible: (detail) => `This sale takes entries only from shoppers its merchant invited${detail ? `: ${detail}` : '.'}`,
      err_login: 'Wrong username or password.',
      err_unauthenticated: 'Your session has ended. Please log in again.',
      err_forbidden: 'Your account isn’t allowed to do that.',
      err_order_not_found: 'That order wasn’t found.',
      err_not_found: 'That voucher isn’t on sale any more.',
      err_sold_out: 'Sorry — this voucher is sold out.',
      err_limit_exceeded: 'You already have as many of this voucher as one shopper may buy.',
      err_not_started: 'This sale hasn’t opened yet. The countdown shows when it does.',
      err_ended: 'This sale has ended.',
      err_conflict_pay: 'This order can’t be paid any more — it was cancelled or its time to pay ran out.',
      err_conflict_cancel: 'This order can’t be cancelled any more.',
      err_conflict: 'That can’t be done in the order’s current state.',
      err_username_taken: 'That username is taken. Please pick another one.',
      err_too_large: 'That request was too large.',
      err_rate_limited: (s) => `Too many tries — trying again in ${s} s.`,
      err_unavailable: (s) => `The shop is very busy right now — please try again in ${s} s.`,
      err_sale_paused: 'The shop paused this sale for a moment. The page shows when it reopens.',
      err_not_admitted: 'This sale has a waiting room: your turn to buy comes when the line lets you in.',
      err_unpaid_limit: (when) => `Too many of your holds ran out unpaid or were cancelled recently — you can buy again from ${when}.`,
      later: 'later',
      err_internal: 'Something went wrong on our side. Please try again.',
    },
    'zh-CN': {
      pageTitle: '限时秒杀',
      skip: '跳到商品列表',
      brand: '限时秒杀',
      clockTitle: '倒计时以服务器时间为准，而非本设备的时间',
      serverTime: '服务器时间',
      signedInAs: '当前账号',
      logout: '退出登录',
      langLabel: '语言',
      authTitle: '登录后购买',
      authHint: '第一次来？设置用户名和密码，然后点击“注册账号”。',
      username: '用户名',
      password: '密码',
      login: '登录',
      register: '注册账号',
      loginWhy: '该用户名的密码错误次数过多：请输入图中的字符后登录。',
      registerWhy: '注册账号需要验证码：请输入图中的字符，然后点击“注册账号”。',
      captchaAlt: '验证码图片：请输入您看到的字符',
      captchaAudio: '语音验证码：请输入您听到的数字',
      captchaChars: '图中的字符',
      captchaDigits: '听到的数字',
      captchaLoading: '正在加载图片…',
      captchaPicFail: '图片加载失败，请点击“换一张”。',
      newPicture: '换一张',
      showPicture: '改看图片',
      listenInstead: '改听语音',
      listenNew: '再听一段',
      ordersTitle: '我的订单',
      ordersEmpty: '还没有订单。请在下方挑选商品。',
      vouchersTitle: '在售商品',
      vouchersLoading: '正在加载商品…',
      vouchersLoadFail: '商品加载失败，正在重试…',
      nothingOnSale: '目前没有在售商品，请稍后再来。',
      vouchersLive: '实时更新',
      updatedAt: (time) => `更新于 ${time}`,
      footer: '价格和时间均以服务器为准。订单状态实时更新，无需刷新页面。',
      wsOffline: '离线',
      wsConnecting: '正在连接…',
      wsLive: '实时',
      wsReconnecting: (s) => `${s} 秒后重新连接`,
      yourPlace: '您的位置',
      peopleAhead: '前面人数',
      estWait: '预计等待',
      lineProgress: '排队进度',
      quantity: '数量',
      joinLine: '加入排队',
      joining: '正在加入…',
      enterDraw: '参加抽签',
      entering: '正在报名…',
      buy: '立即购买',
      buying: '正在购买…',
      waitSecs: (s) => `请等待 ${s} 秒`,
      reservedDone: '已抢到 ✓',
      notOpen: '尚未开售',
      soldOut: '已售罄',
      pausedBtn: '已暂停',
      saleEnded: '已结束',
      logInToBuy: '登录后购买',
      pay: '支付',
      cancel: '取消',
      kind_seckill: '秒杀',
      kind_limit: '限量',
      kind_common: '普通',
      stockText: '剩余 {left} 件 / 共 {total} 件',
      stockAria: (left, total) => `剩余 ${left} 件，共 ${total} 件`,
      limitEach: (n) => `· 每人限购 ${n} 件`,
      opensIn: (d) => `距开售 ${d}`,
      liveEnds: (d) => `热卖中 · 距结束 ${d}`,
      pausedText: '商家已暂停销售 · 稍后恢复',
      endedAt: (when) => `已于 ${when} 结束`,
      days: (d, rest) => `${d} 天 ${rest}`,
      retryIn: (s) => `${s} 秒后可以重试。`,
      retryNow: '现在可以重试了。',
      tryingAgain: '正在重试…',
      status_reserved: '确认中',
      status_created: '待支付',
      status_paid: '已支付',
      status_cancelled: '已取消',
      status_failed: '未成功',
      status_refunded: '已退款',
      hint_reserved: '正在确认您的订单…',
      hint_paid: '已支付，祝您购物愉快！',
      hint_cancelled: '已取消，库存已退回。',
      hint_failed: '订单未能完成，没有扣款。',
      hint_refunded: '已退款：款项已退回给您。',
      news_created: (ref) => `订单 ${ref} 已确认，请在倒计时结束前完成支付。`,
      news_paid: (ref) => `订单 ${ref} 已支付。`,
      news_cancelled: (ref) => `订单 ${ref} 已取消。`,
      news_failed: (ref) => `订单 ${ref} 未能完成，库存已退回。`,
      news_refunded: (ref) => `订单 ${ref} 已退款，款项已退回给您。`,
      orderRef: (ref) => `订单 ${ref}`,
      orderQty: (n) => `${n} 件`,
      voucherN: (id) => `商品 ${id}`,
      payOrder: (ref) => `支付订单 ${ref}`,
      cancelOrder: (ref) => `取消订单 ${ref}`,
      waitingPayment: '等待支付',
      payRunOut: '支付时间已过',
      payWithin: (d) => `请在 ${d} 内支付`,
      paidThanks: (ref) => `订单 ${ref} 支付成功，谢谢！`,
      cancelledBack: (ref) => `订单 ${ref} 已取消，库存已重新上架。`,
      sessionEnded: '登录已过期，请重新登录。',
      loggedOut: '您已退出登录。',
      needCreds: '请输入用户名和密码。',
      welcomeBack: (name) => `欢迎回来，${name}。`,
      accountCreated: (name) => `注册成功，欢迎你，${name}！`,
      captchaLoadFail: (why) => `验证码加载失败。${why}`,
      loginCaptchaAsk: '该用户名的密码错误次数过多。请输入图中的字符，然后重新登录。',
      typeCaptchaFirst: '请先输入验证码图片中的字符。',
      logInFirstJoin: '请先登录，再加入排队。',
      logInFirstBuy: '请先登录，再点击购买。',
      inLine: '您已加入排队。本页面会实时显示您的位置，轮到您时无需刷新即可购买。',
      chooseQty: (max) => `请选择 1 到 ${max} 之间的数量。`,
      gotIt: (ref) => `抢到了！订单 ${ref} 已预留，正在确认。`,
      yourTurn: (title) => `轮到您购买“${title}”了！`,
      drawLost: (title, place) => `“${title}”已开奖：您未中签${place ? `，您在候补名单第 ${place} 位` : ''}。`,
      powChecking: (s) => `正在为本次抢购验证设备… ${s} 秒`,
      tooManyWait: (s) => `尝试次数过多，请等待 ${s} 秒后再点击购买。`,
      networkBuy: '暂时无法连接商城。请再次点击购买重试，不会重复下单。',
      roomLogIn: '本场抢购设有排队室。请先登录，再加入排队。',
      roomOpensIn: (d) => `本场抢购设有排队室，${d} 后开始排队。`,
      roomJoin: '本场抢购设有排队室：加入排队，等待轮到您购买。',
      roomDrawn: '您已加入排队。开售时将随机排定顺序。',
      roomNumber: (n) => `您排在第 ${n} 位。`,
      anyMoment: '马上',
      roomSoldOut: '已售罄，您的位置会保留；可能还会有退回的库存。',
      whenUnitsBack: '有库存退回时',
      roomTurn: (d) => `轮到您了！请在 ${d} 内购买。`,
      roomUsed: '您已用掉本次购买机会。',
      roomHeld: (until, d) => `您离开时轮到了您；该机会为您保留到 ${until}（剩余 ${d}）。`,
      heldNotice: (title, until) => `您离开时轮到了您购买“${title}”；该机会保留到 ${until}。请点击“领取我的机会”购买。`,
      takeTurn: '领取我的机会',
      takingTurn: '正在领取您的机会…',
      heldNext: '欢迎回来：下一件空出的商品归您。',
      joinChallengeInvalid: '加入排队前，本设备的验证已过期。请再次点击加入。',
      regChecking: (s) => `注册前正在验证本设备… ${s} 秒`,
      regCheckExpired: '账号创建前，本设备的验证已过期。请再次点击“注册账号”。',
      roomExpired: '您的购买机会已过期：通行证未在时限内使用。',
      roomClosed: '排队已结束：本场抢购已结束。',
      drawLogIn: '本场为抽签销售。请先登录，再参加抽签。',
      drawOpensIn: (d) => `本场为抽签销售，${d} 后开始报名。`,
      drawEnter: (d) => `本场为抽签销售：请在开售前报名，还剩 ${d}。报名先后不影响结果。`,
      drawClosed: '本次抽签已停止报名。',
      drawEntered: (d) => `您已参加抽签，将于开售时开奖，还剩 ${d}。`,
      drawMaking: '您已参加抽签，正在开奖…',
      drawWon: (d) => `恭喜中签！请在 ${d} 内购买。`,
      drawUsed: '您已中签并完成购买。',
      drawVoid: '本次抽签无效：开奖前报名数据丢失，因此无人中签。商家将另行公布新的抽签。',
      drawWaitlisted: (n) => `您在候补名单第 ${n} 位：中签者未购买的名额将按抽签顺序递补给您。`,
      drawOver: '抽签对您而言已结束：销售已结束，或您中签后的购买时限已过。',
      drawVoidShort: '本次抽签无效：开奖前报名数据丢失，因此无人中签。',
      drawEntry: (id) => ` 您的报名编号为 ${id}…；`,
      drawTicket: (ticket, cutoff) => ` 您的签号 ${ticket}…，中签线 ${cutoff}…（签号最小者中签）。`,
      drawBeacon: (round, time) => ` 本次抽签的随机数取自 drand 第 ${round} 轮，将于 ${time} 公布：此前任何人都无法得知。`,
      drawCommitment: (c) => ` 承诺值：${c}…`,
      err_network: '暂时无法连接商城，请检查网络后重试。',
      err_invalid_input: (detail) => `输入有误${detail ? `：${detail}` : ''}。`,
      err_captcha_invalid: '验证码不正确（或已过期）。已换一张新图片，请重新输入。',
      err_challenge_invalid: '购买请求送达前，本设备的验证已过期。请再次点击购买。',
      err_pow_failed: '此浏览器无法完成商城的设备验证。请重试，或换一个浏览器。',
      err_not_eligible: (detail) => `本场抢购仅接受商家邀请的顾客报名${detail ? `：${detail}` : '。'}`,
      err_login: '用户名或密码错误。',
      err_unauthenticated: '登录已过期，请重新登录。',
      err_forbidden: '您的账号无权执行此操作。',
      err_order_not_found: '找不到该订单。',
      err_not_found: '该商品已下架。',
      err_sold_out: '抱歉，该商品已售罄。',
      err_limit_exceeded: '您购买的数量已达到每人限购上限。',
      err_not_started: '本场抢购尚未开始，请留意倒计时。',
      err_ended: '本场抢购已结束。',
      err_conflict_pay: '该订单已无法支付：订单已取消，或支付时间已过。',
      err_conflict_cancel: '该订单已无法取消。',
      err_conflict: '订单当前的状态不允许此操作。',
      err_username_taken: '该用户名已被占用，请换一个。',
      err_too_large: '请求内容过大。',
      err_rate_limited: (s) => `尝试次数过多，${s} 秒后自动重试。`,
      err_unavailable: (s) => `当前访问人数过多，请 ${s} 秒后再试。`,
      err_sale_paused: '商家暂时暂停了本场销售，恢复时页面会自动更新。',
      err_not_admitted: '本场抢购设有排队室：排到您时才能购买。',
      err_unpaid_limit: (when) => `您近期有过多订单未支付或被取消，${when}后才能再次购买。`,
      later: '稍后',
      err_internal: '系统出了点问题，请重试。',
    },
  };

  // pickLang is the language chosen on the page before, else the first of
  // the browser's languages the page speaks (navigator.languages follows the
  // browser's Accept-Language), else English. Any Chinese reads the
  // Simplified table: closer to a zh-TW reader than English is.
  function pickLang() {
    try {
      const kept = localStorage.getItem(LANG_KEY);
      if (kept && LANGS.includes(kept)) return kept;
    } catch (e) { /* storage blocked: ask the browser */ }
    const asked = navigator.languages && navigator.languages.length ? navigator.languages : [navigator.language || ''];
    for (const tag of asked) {
      const l = String(tag).toLowerCase();
      if (l === 'zh' || l.startsWith('zh-')) return 'zh-CN';
      if (l === 'en' || l.startsWith('en-')) return 'en';
    }
    return 'en';
  }

  let lang = pickLang();

  /**
   * t is the sentence key names in the page's language, with its figures.
   * @param {string} key
   * @param {...any} args
   * @returns {string}
   */
  function t(key, ...args) {
    const m = MESSAGES[lang][key] ?? MESSAGES.en[key];
    if (typeof m === 'function') return m(...args);
    return m === undefined ? key : m;
  }

  // translateStatic puts the sentences named by data-i18n (the text) and
  // data-i18n-title, -alt and -aria-label (those attributes) into the markup
  // under root.
  function translateStatic(root) {
    for (const el of root.querySelectorAll('[data-i18n]')) setText(el, t(el.dataset.i18n));
    for (const attr of ['title', 'alt', 'aria-label']) {
      for (const el of root.querySelectorAll(`[data-i18n-${attr}]`)) el.setAttribute(attr, t(el.getAttribute(`data-i18n-${attr}`)));
    }
  }

  // setKeyed shows one sentence and names it on the element, so a change of
  // language translates it where it stands.
  function setKeyed(el, key) {
    el.dataset.i18n = key;
    setText(el, t(key));
  }

  // ---- State ------------------------------------------------------------

  const state = {
    session: null, // {token, userId, username, expiresAt(ms, server clock)}
    vouchers: new Map(), // id -> voucher (API object)
    cards: new Map(), // id -> card controller
    orders: new Map(), // id -> order (API object)
    orderEls: new Map(), // id -> <li>
    vouchersLoadedOnce: false,
    vouchersReadAt: 0, // server ms of the last catalog read
    /** @type {Element | null} */
    hovered: null, // the card under the mouse
  };

  // ---- Server clock -------------------------------------------------------
  // Every API answer bounds the offset between the server's clock and ours.
  // The server stamped it at some moment S between our send and our receive,
  // so offset = S - local lies in [S - receivedAt, S - sentAt]. S is known to
  // the millisecond from an X-Server-Time header (unix ms) when the gateway
  // sends one; otherwise only from the Date header, which has whole seconds
  // and which fasthttp refreshes once a second, so S lies in [D, D + 2 s).
  // Intersecting the intervals of many answers narrows the offset; we use
  // the middle.
  const clock = { lo: -Infinity, hi: Infinity };

  function bound(lo, hi) {
    let nlo = Math.max(clock.lo, lo);
    let nhi = Math.min(clock.hi, hi);
    if (nlo > nhi) { // a clock jumped (device slept, NTP step): start over
      nlo = lo;
      nhi = hi;
    }
    clock.lo = nlo;
    clock.hi = nhi;
  }

  function observeDate(res, sentAt, receivedAt) {
    const precise = Number(res.headers.get('X-Server-Time'));
    if (precise > 0) {
      bound(precise - receivedAt, precise - sentAt);
      return;
    }
    const header = res.headers.get('Date');
    const d = header ? Date.parse(header) : NaN;
    if (!Number.isNaN(d)) bound(d - receivedAt, d + 2000 - sentAt);
  }

  // learnServerTime narrows the offset with what an answer proved: that the
  // server's clock was past (after=true) or not yet at (after=false) instant
  // `at` when it answered. A not_started or a first successful buy right at
  // the opening pins the offset exactly where it matters.
  function learnServerTime(at, after, sentAt, receivedAt) {
    if (after) {
      if (at - receivedAt <= clock.hi) clock.lo = Math.max(clock.lo, at - receivedAt);
    } else if (at - sentAt >= clock.lo) {
      clock.hi = Math.min(clock.hi, at - sentAt);
    }
  }

  function serverNow() {
    const offset = Number.isFinite(clock.lo) ? (clock.lo + clock.hi) / 2 : 0;
    return Date.now() + offset;
  }

  // ---- Formatting ---------------------------------------------------------

  // Formatters are built once per language (and currency): the clock
  // formats several times a second.
  const formats = new Map();
  function format(key, make) {
    const k = `${lang}|${key}`;
    let f = formats.get(k);
    if (!f) {
      f = make();
      formats.set(k, f);
    }
    return f;
  }

  // fmtMoney shows an amount of the currency's minor units (cents: the
  // API's price_cents) in the voucher's currency, CNY when it names none.
  function fmtMoney(cents, currency) {
    const code = /^[A-Z]{3}$/.test(currency || '') ? currency : 'CNY';
    /** @type {Intl.NumberFormat} */
    const f = format(`money|${code}`, () => new Intl.NumberFormat(lang, { style: 'currency', currency: code }));
    return f.format(Number(cents) / 10 ** f.resolvedOptions().minimumFractionDigits);
  }

  /** @type {(n: number) => string} */
  const fmtNum = (n) => format('num', () => new Intl.NumberFormat(lang)).format(n);
  /** @type {(ms: number) => string} */
  const fmtHM = (ms) => format('hm', () => new Intl.DateTimeFormat(lang, { hour: '2-digit', minute: '2-digit' })).format(ms);
  const fmtTime = (ms) => format('time', () => new Intl.DateTimeFormat(lang, { hour: '2-digit', minute: '2-digit', second: '2-digit' })).format(ms);
  /** @type {(ms: number) => string} */
  const fmtDateTime = (ms) => format('datetime', () => new Intl.DateTimeFormat(lang, { dateStyle: 'medium', timeStyle: 'short' })).format(ms);

  function fmtDuration(ms) {
    const total = Math.max(0, Math.ceil(ms / 1000));
    const d = Math.floor(total / 86400);
    const h = Math.floor((total % 86400) / 3600);
    const m = Math.floor((total % 3600) / 60);
    const s = total % 60;
    /** @type {(n: number) => string} */
    const two = (n) => format('two', () => new Intl.NumberFormat(lang, { minimumIntegerDigits: 2, useGrouping: false })).format(n);
    if (d > 0) return t('days', fmtNum(d), `${two(h)}:${two(m)}:${two(s)}`);
    if (h > 0) return `${h}:${two(m)}:${two(s)}`;
    return `${two(m)}:${two(s)}`;
  }

  // shortRef keeps the end of a long order id, which is the part that differs.
  const shortRef = (id) => `#…${String(id).slice(-6)}`;

  // ---- Status line --------------------------------------------------------

  // say writes the status line. quiet keeps a screen reader from reading it
  // aloud: the card it concerns already says it in its own live region.
  function say(text, kind = 'info', quiet = false) {
    const el = $('#message');
    el.setAttribute('aria-live', quiet ? 'off' : 'polite');
    el.dataset.kind = kind;
    el.textContent = text;
  }

  // ---- HTTP ---------------------------------------------------------------

  class ApiError extends Error {
    /**
     * @param {number} status
     * @param {string} code
     * @param {string} message
     * @param {number} retryAfter
     * @param {Partial<ApiErrorBody['error']>} [detail] the error body's fields and retry_at
     */
    constructor(status, code, message, retryAfter, detail = {}) {
      super(message || code);
      this.status = status;
      this.code = code;
      this.retryAfter = retryAfter; // seconds, or 0 when absent
      this.fields = detail.fields || []; // invalid_input: [{field, reason}]
      this.retry_at = detail.retry_at || ''; // unpaid_limit: RFC 3339
    }
  }

  const CODE_FOR_STATUS = {
    400: 'invalid_input', 401: 'unauthenticated', 403: 'forbidden', 404: 'not_found',
    409: 'conflict', 413: 'too_large', 429: 'rate_limited', 503: 'unavailable',
  };

  function parseRetryAfter(value) {
    if (!value) return 0;
    const secs = Number(value);
    if (Number.isFinite(secs)) return Math.max(0, Math.ceil(secs));
    const at = Date.parse(value);
    return Number.isNaN(at) ? 0 : Math.max(0, Math.ceil((at - serverNow()) / 1000));
  }

  // nextPage is the path (under API) of the page a list's Link header names
  // (rel="next"), or '' on the last page.
  function nextPage(res) {
    const m = /<([^>]*)>\s*;\s*rel="?next"?/.exec(res.headers.get('Link') || '');
    if (!m) return '';
    const url = new URL(m[1], location.href);
    return url.pathname.startsWith(API + '/') ? url.pathname.slice(API.length) + url.search : '';
  }

  /**
   * apiList reads every page of a list (GET /vouchers, GET /orders),
   * following Link, at most maxPages of them.
   * @template T
   * @param {string} path
   * @param {ApiOptions} [opts]
   * @param {number} [maxPages]
   * @returns {Promise<T[]>}
   */
  async function apiList(path, opts = {}, maxPages = 20) {
    /** @type {T[]} */
    const all = [];
    for (let i = 0; path && i < maxPages; i++) {
      let next = '';
      const page = await api('GET', path, { ...opts, onResponse: (res) => { next = nextPage(res); } });
      if (Array.isArray(page)) all.push(...page);
      path = next;
    }
    return all;
  }

  /**
   * @typedef {object} ApiOptions
   * @property {unknown} [body] sent as JSON
   * @property {Record<string, string>} [headers]
   * @property {boolean} [auth] sign the request with the session's token (default true)
   * @property {((res: Response) => void) | null} [onResponse] sees a 2xx answer's headers
   */

  /**
   * api sends one request to the API and returns its JSON body, or throws an
   * ApiError with the error body's code, message, fields and retry_at.
   * @param {string} method
   * @param {string} path under API, e.g. '/orders'
   * @param {ApiOptions} [opts]
   * @returns {Promise<any>}
   */
  async function api(method, path, { body, headers = {}, auth = true, onResponse = null } = {}) {
    /** @type {Record<string, string>} */
    // The API answers its messages in the page's language.
    const h = { Accept: 'application/json', 'Accept-Language': lang, ...headers };
    if (body !== undefined) h['Content-Type'] = 'application/json';
    if (auth && state.session) h.Authorization = `Bearer ${state.session.token}`;
    const sentAt = Date.now();
    let res;
    try {
      res = await fetch(API + path, {
        method,
        headers: h,
        body: body === undefined ? undefined : JSON.stringify(body),
        cache: 'no-store', // a cached answer would carry a stale Date
        credentials: 'same-origin',
      });
    } catch (e) {
      throw new ApiError(0, 'network', 'network error', 0);
    }
    observeDate(res, sentAt, Date.now());
    if (onResponse && res.ok) onResponse(res);
    const text = await res.text().catch(() => '');
    let data = null;
    if (text) {
      try { data = JSON.parse(text); } catch (e) { data = null; }
    }
    if (!res.ok) {
      const err = data && data.error ? data.error : {};
      throw new ApiError(res.status, err.code || CODE_FOR_STATUS[res.status] || 'internal',
        err.message || '', parseRetryAfter(res.headers.get('Retry-After')), err);
    }
    return data;
  }

  // sentence turns an API error into what a shopper reads. what says what
  // was being done, for the few codes whose meaning depends on it.
  /**
   * @param {Pick<ApiError, 'code'> & Partial<ApiError>} err
   * @param {string} [what]
   * @returns {string}
   */
  function sentence(err, what) {
    const wait = fmtNum(err.retryAfter || 1);
    switch (err.code) {
      case 'invalid_input': return t('err_invalid_input', err.message);
      case 'challenge_invalid':
        if (what === 'join') return t('joinChallengeInvalid');
        return t(what === 'register' || what === 'captcha' ? 'err_captcha_invalid' : 'err_challenge_invalid');
      case 'not_eligible': return t('err_not_eligible', err.message);
      case 'unauthenticated': return t(what === 'login' ? 'err_login' : 'err_unauthenticated');
      case 'not_found': return t(what === 'order' ? 'err_order_not_found' : 'err_not_found');
      case 'conflict':
        if (what === 'pay') return t('err_conflict_pay');
        if (what === 'cancel') return t('err_conflict_cancel');
        return t('err_conflict');
      case 'rate_limited': return t('err_rate_limited', wait);
      case 'unavailable': return t('err_unavailable', wait);
      case 'unpaid_limit':
        // error.retry_at is when the refusal ends (gateway/openapi.yaml).
        return t('err_unpaid_limit', err.retry_at ? fmtDateTime(Date.parse(err.retry_at)) : t('later'));
      default:
        return MESSAGES.en[`err_${err.code}`] === undefined ? t('err_internal') : t(`err_${err.code}`);
    }
  }

  // uuid is the Idempotency-Key. crypto.randomUUID needs a secure context;
  // a shop reached over plain http on a LAN still gets a v4 UUID.
  function uuid() {
    if (window.crypto && typeof crypto.randomUUID === 'function') return crypto.randomUUID();
    const b = crypto.getRandomValues(new Uint8Array(16));
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    const hex = Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  }

  // ---- Session ------------------------------------------------------------

  function loadSession() {
    try {
      const s = JSON.parse(sessionStorage.getItem(SESSION_KEY) || 'null');
      if (s && s.token && s.userId) return s;
    } catch (e) { /* storage blocked or corrupt: start logged out */ }
    return null;
  }

  function saveSession(s) {
    try {
      if (s) sessionStorage.setItem(SESSION_KEY, JSON.stringify(s));
      else sessionStorage.removeItem(SESSION_KEY);
    } catch (e) { /* storage blocked: the token lives in memory only */ }
  }

  function setSession(s) {
    state.session = s;
    saveSession(s);
    const inside = Boolean(s);
    $('#auth').hidden = inside;
    $('#account-bar').hidden = !inside;
    $('#whoami').textContent = inside ? s.username : '';
    $('#orders-section').hidden = !inside;
    socket.reopen();
    if (inside) {
      refreshOrders();
    } else {
      state.orders.clear();
      state.orderEls.clear();
      $('#orders').replaceChildren();
    }
    updateOrdersEmpty();
    for (const card of state.cards.values()) {
      card.queue = null; // another shopper's place is not this one's
      card.update();
    }
  }

  function endSession(text) {
    setSession(null);
    say(text, 'warn');
    $('#username').focus();
  }

  function credentials() {
    const username = $('#username').value.trim();
    const password = $('#password').value;
    if (!username || !password) {
      say(t('needCreds'), 'warn');
      (username ? $('#password') : $('#username')).focus();
      return null;
    }
    return { username, password };
  }

  // entryToken is the merchant's entry token the page was opened with
  // (?entry_token=...), or ''.
  function entryToken() {
    return new URLSearchParams(window.location.search).get('entry_token') || '';
  }

  // loginCaptcha is the captcha a login needs once its username had too
  // many failed logins: the server then answers captcha_invalid until a
  // login carries a solved one. Each one serves one try, right or wrong.
  const LOGIN_WHY = 'loginWhy';
  const REGISTER_WHY = 'registerWhy';
  const loginCaptcha = {
    id: '',
    async load(why = LOGIN_WHY) {
      setKeyed($('#login-captcha-why'), why);
      $('#login-captcha').hidden = false;
      $('#login-captcha-answer').value = '';
      this.id = '';
      try {
        const res = await api('GET', '/captcha', { auth: false });
        this.id = res.captcha_id;
        const img = $('#login-captcha-img');
        img.src = res.image;
        img.hidden = false;
      } catch (err) {
        say(t('captchaLoadFail', sentence(err, 'captcha')), 'error');
      }
    },
    hide() {
      this.id = '';
      $('#login-captcha').hidden = true;
    },
    // with adds the typed answer to a login's body while a captcha is shown.
    with(creds) {
      if (!this.id) return creds;
      return { ...creds, captcha_id: this.id, captcha_answer: $('#login-captcha-answer').value.trim() };
    },
  };

  async function login(creds, quiet) {
    let res;
    try {
      res = await api('POST', '/sessions', { body: loginCaptcha.with(creds), auth: false });
    } catch (err) {
      // A captcha shown was spent by this try; one asked for is shown.
      if (loginCaptcha.id || err.code === 'captcha_invalid') loginCaptcha.load();
      throw err;
    }
    loginCaptcha.hide();
    const expiresAt = Date.parse(res.expires_at);
    setSession({
      token: res.token,
      userId: String(res.user_id),
      username: creds.username,
      expiresAt: Number.isNaN(expiresAt) ? 0 : expiresAt,
    });
    $('#password').value = '';
    // The form hid under the focus: the keyboard goes on from the sale, not
    // from the top of the page.
    const at = document.activeElement;
    if (!at || at === document.body || $('#auth').contains(at)) $('#vouchers-title').focus();
    if (!quiet) say(t('welcomeBack', creds.username), 'ok');
  }

  async function withButton(button, work) {
    if (button.disabled) return;
    button.disabled = true;
    button.setAttribute('aria-busy', 'true');
    try {
      await work();
    } finally {
      button.disabled = false;
      button.removeAttribute('aria-busy');
    }
  }

  function onLogin(ev) {
    ev.preventDefault();
    const creds = credentials();
    if (!creds) return;
    withButton($('#login'), async () => {
      const withCaptcha = Boolean(loginCaptcha.id);
      try {
        await login(creds, false);
      } catch (err) {
        if (err.code === 'captcha_invalid') {
          say(withCaptcha
            ? sentence(err, 'login')
            : t('loginCaptchaAsk'), 'warn');
          $('#login-captcha-answer').focus();
          return;
        }
        say(sentence(err, 'login'), 'error');
        $('#password').focus();
      }
    });
  }

  // registerPow says the shop took a registration's proof of work
  // (SECKILL_REGISTER_CHALLENGE=pow): later sign-ups solve one first.
  const registerPow = { on: false };

  /**
   * registerWork solves a registration's challenge (GET
   * /api/v1/challenges?purpose=register, or ch when already asked for),
   * its progress said on the status line.
   * @param {{challenge_id: string, salt: string, difficulty_bits: number}} [ch]
   */
  async function registerWork(ch) {
    const c = ch || await api('GET', '/challenges?purpose=register', { auth: false });
    const nonce = await solveWork(c, (ms) => say(t('regChecking', fmtNum(Math.round(ms / 1000))), 'info'));
    return { challenge_id: c.challenge_id, challenge_answer: nonce };
  }

  // register creates the account. A shop that takes a challenge answers a
  // bare try 400 challenge_invalid; which kind it takes is then asked: a
  // register challenge is given under pow, and is 409 conflict otherwise
  // (a captcha, gateway/openapi.yaml), when the captcha path takes over.
  async function register(creds) {
    if (registerPow.on) {
      await api('POST', '/users', { body: { ...creds, ...(await registerWork()) }, auth: false });
      return;
    }
    try {
      await api('POST', '/users', { body: loginCaptcha.with(creds), auth: false });
    } catch (err) {
      if (err.code !== 'challenge_invalid' || loginCaptcha.id) throw err;
      let ch;
      try {
        ch = await api('GET', '/challenges?purpose=register', { auth: false });
      } catch (e) {
        throw e.code === 'conflict' ? err : e;
      }
      registerPow.on = true;
      await api('POST', '/users', { body: { ...creds, ...(await registerWork(ch)) }, auth: false });
    }
  }

  function onRegister() {
    const creds = credentials();
    if (!creds) return;
    withButton($('#register'), async () => {
      const withCaptcha = Boolean(loginCaptcha.id);
      try {
        await register(creds);
      } catch (err) {
        if (registerPow.on && err.code === 'challenge_invalid') {
          say(t('regCheckExpired'), 'warn');
          return;
        }
        // A captcha shown was spent by this try; one asked for is shown.
        if (loginCaptcha.id || err.code === 'challenge_invalid') loginCaptcha.load(REGISTER_WHY);
        if (err.code === 'challenge_invalid') {
          say(withCaptcha ? sentence(err, 'register') : t(REGISTER_WHY), 'warn');
          $('#login-captcha-answer').focus();
          return;
        }
        say(sentence(err, 'register'), 'error');
        $('#username').focus();
        return;
      }
      loginCaptcha.hide();
      try {
        await login(creds, true);
        say(t('accountCreated', creds.username), 'ok');
      } catch (err) {
        say(sentence(err, 'login'), 'error');
        $('#username').focus();
      }
    });
  }

  // ---- Vouchers -------------------------------------------------------------

  // GROUP ranks the phases for the list: what can be bought now first, then
  // what opens next, then what is over.
  const GROUP = { live: 0, paused: 0, upcoming: 1, soldout: 2, ended: 2 };

  function phaseOf(v, now) {
    if (now >= Date.parse(v.end_at)) return 'ended';
    if (v.state === 'paused') return 'paused';
    if (now < Date.parse(v.begin_at)) return 'upcoming';
    return 'live';
  }

  // Card drives one voucher's article: its figures, countdown, captcha and
  // the buy intent (one Idempotency-Key per intent, reused by every retry).
  class Card {
    constructor(v) {
      this.id = v.id;
      const el = $('#voucher-template').content.firstElementChild.cloneNode(true);
      this.el = el;
      el.dataset.voucherId = v.id;
      const qty = $('.qty', el);
      qty.id = `qty-${v.id}`;
      $('.qty-label', el).htmlFor = qty.id;
      const answer = $('.captcha-answer', el);
      answer.id = `captcha-${v.id}`;
      $('.captcha-label', el).htmlFor = answer.id;
      this.buyButton = $('.buy', el);
      const note = $('.card-notice', el);
      note.id = `notice-${v.id}`;
      // The button's description is the card's latest word on it.
      this.buyButton.setAttribute('aria-describedby', note.id);
      $('.join', el).setAttribute('aria-describedby', note.id);
      this.group = -1; // GROUP of the phase last drawn; the list sorts by it
      this.waitShown = false; // a Retry-After countdown is on show
      this.refocus = false; // the Buy button had the focus when it greyed out
      this.qty = qty;
      this.answer = answer;
      this.intent = null; // {key, qty, tries}
      this.inflight = false;
      this.waitUntil = 0; // Date.now() ms until which a 429/503 is waited out
      this.retryAfterWait = false;
      this.doneUntil = 0; // short pause after a success, so a double click cannot buy twice
      this.soldOut = false; // learnt from a 409 sold_out, until the stock figure rises
      this.captcha = { id: '', loadedAt: 0, loading: false, failedAt: 0 };
      this.pow = null; // a pow voucher's challenge being solved (solvePow)
      // The waiting room: the shopper's place (the API's queue object, as
      // answered or pushed), when it came, and the first position seen (the
      // progress bar runs from it to admission).
      this.joinButton = $('.join', el);
      this.queue = null;
      this.queueAt = 0;
      this.queueStart = 0;
      this.joining = false;
      this.joinButton.addEventListener('click', () => this.join());
      this.takeButton = $('.take', el);
      this.taking = false;
      this.takeButton.addEventListener('click', () => this.takeTurn());
      $('.buy-form', el).addEventListener('submit', (ev) => { ev.preventDefault(); this.buy(); });
      $('.captcha-refresh', el).addEventListener('click', () => this.loadCaptcha(true));
      $('.captcha-listen', el).addEventListener('click', () => this.loadCaptcha(true, 'audio'));
      qty.addEventListener('change', () => { this.intent = null; });
    }

    get voucher() { return state.vouchers.get(this.id); }

    // render copies the voucher's figures into the card.
    render() {
      const v = this.voucher;
      const el = this.el;
      $('.title', el).textContent = v.title;
      setText($('.kind', el), t(`kind_${v.kind === 'seckill' || v.kind === 'limit' ? v.kind : 'common'}`));
      $('.kind', el).dataset.kind = v.kind;
      // currency: the voucher's ISO 4217 code (gateway/openapi.yaml).
      setText($('.price', el), fmtMoney(v.price_cents, v.currency));
      this.renderStock();
      const bar = $('.stock-bar', el);
      bar.max = Math.max(1, v.stock_total);
      bar.value = Math.max(0, v.stock_left);
      bar.setAttribute('aria-label', t('stockAria', fmtNum(v.stock_left), fmtNum(v.stock_total)));
      setText($('.limit', el), v.per_user_limit ? t('limitEach', fmtNum(v.per_user_limit)) : '');
      this.qty.max = String(Math.max(1, Math.min(v.per_user_limit || 100, 100)));
      if (v.stock_left > 0) this.soldOut = false; // stock came back (a cancel or a timeout)
      this.update();
    }

    // renderStock writes "5 of 10 left" in the language's word order,
    // keeping the figures in their own elements (.stock-left, .stock-total).
    renderStock() {
      const v = this.voucher;
      const box = $('.stock-figures', this.el);
      const left = $('.stock-left', box);
      const total = $('.stock-total', box);
      setText(left, fmtNum(v.stock_left));
      setText(total, fmtNum(v.stock_total));
      if (box.dataset.lang === lang) return;
      box.dataset.lang = lang;
      const parts = t('stockText').split(/(\{left\}|\{total\})/);
      box.replaceChildren(...parts.map((x) => (x === '{left}' ? left : x === '{total}' ? total : x)).filter((x) => x !== ''));
    }

    // notice says something about this card in the card itself (its own live
    // region, beside the button it is about), and on the status line, which
    // stays quiet: a screen reader hears it once.
    notice(text, kind = 'info') {
      const el = $('.card-notice', this.el);
      el.dataset.kind = kind;
      el.textContent = text;
      say(text, kind, true);
      // Brought on screen only for a shopper acting on this card (the
      // focus is in it, or was until its button greyed out): news pushed
      // while they read elsewhere does not scroll the page away.
      const acting = this.el.contains(document.activeElement) || this.refocus;
      if (acting && el.getBoundingClientRect().bottom > window.innerHeight) el.scrollIntoView({ block: 'nearest' });
    }

    // clearNotice removes the card's word once it no longer holds.
    clearNotice() {
      const el = $('.card-notice', this.el);
      el.textContent = '';
      el.dataset.kind = '';
    }

    // update refreshes what depends on the clock: phase, countdown, button.
    update() {
      const v = this.voucher;
      if (!v) return;
      const now = serverNow();
      let phase = phaseOf(v, now);
      if (phase === 'live' && (this.soldOut || v.stock_left <= 0)) phase = 'soldout';
      if (this.el.dataset.state !== phase) this.el.dataset.state = phase;
      if (GROUP[phase] !== this.group) {
        this.group = GROUP[phase];
        sortSoon();
      }
      const cd = $('.countdown', this.el);
      cd.dataset.phase = phase;
      if (phase === 'upcoming') setText(cd, t('opensIn', fmtDuration(Date.parse(v.begin_at) - now)));
      else if (phase === 'live') setText(cd, t('liveEnds', fmtDuration(Date.parse(v.end_at) - now)));
      else if (phase === 'soldout') setText(cd, t('soldOut'));
      else if (phase === 'paused') setText(cd, t('pausedText'));
      else setText(cd, t('endedAt', fmtDateTime(Date.parse(v.end_at))));

      const b = this.buyButton;
      const wait = Math.ceil((this.waitUntil - Date.now()) / 1000);
      let label = t('buy');
      let disabled = false;
      if (this.inflight) { label = t('buying'); disabled = true; }
      else if (wait > 0) { label = t('waitSecs', fmtNum(wait)); disabled = true; }
      else if (Date.now() < this.doneUntil) { label = t('reservedDone'); disabled = true; }
      else if (phase === 'upcoming') { label = t('notOpen'); disabled = true; }
      else if (phase === 'soldout') { label = t('soldOut'); disabled = true; }
      else if (phase === 'paused') { label = t('pausedBtn'); disabled = true; }
      else if (phase === 'ended') { label = t('saleEnded'); disabled = true; }
      else if (!state.session) { label = t('logInToBuy'); }
      this.updateWait(wait);
      const room = this.updateQueue(phase, now);
      if (room.hideBuy !== b.hidden) b.hidden = room.hideBuy;
      setText(b, label);
      if (b.disabled !== disabled) {
        const hadFocus = document.activeElement === b;
        b.disabled = disabled;
        // Disabling drops keyboard focus to <body>; hand it back when re-enabled.
        if (disabled && hadFocus) this.refocus = true;
        if (!disabled && this.refocus && document.activeElement === document.body) b.focus();
        if (!disabled) this.refocus = false;
      }
      b.classList.toggle('soldout', phase === 'soldout');

      if (this.retryAfterWait && wait <= 0 && !this.inflight) {
        this.retryAfterWait = false;
        this.notice(t('tryingAgain'), 'info');
        this.buy();
      }

      // A captcha is shown and fetched only for shoppers who may use it
      // soon, and renewed before it could expire.
      const wantCaptcha = v.captcha_required && Boolean(state.session) && room.wantCaptcha &&
        (phase === 'live' || (phase === 'upcoming' && Date.parse(v.begin_at) - now < 120000) || room.joinable);
      const box = $('.captcha', this.el);
      if (box.hidden === wantCaptcha) box.hidden = !wantCaptcha;
      // A pow voucher's check is solved as soon as buying is near, so the
      // press finds it done.
      if (v.challenge === 'pow' && state.session &&
        (phase === 'live' || (phase === 'upcoming' && Date.parse(v.begin_at) - now < 60000) || (room.joinable && !this.queue))) {
        this.solvePow().catch(() => {});
      }
      if (wantCaptcha) {
        const stale = Date.now() - this.captcha.loadedAt > 240000;
        if ((!this.captcha.id || stale) && !this.captcha.loading && !this.captchaFailedRecently()) {
          this.loadCaptcha(false);
        }
      }
    }

    // updateWait shows the seconds left of a Retry-After under the card's
    // word (the button counts them down too), and says when Buy is back.
    updateWait(wait) {
      const line = $('.card-retry', this.el);
      if (wait > 0) {
        this.waitShown = true;
        setText(line, t('retryIn', fmtNum(wait)));
        if (line.hidden) line.hidden = false;
        return;
      }
      if (!this.waitShown) return;
      this.waitShown = false;
      line.hidden = true;
      delete this.el.dataset.notice;
      if (!this.retryAfterWait) this.notice(t('retryNow'), 'info');
    }

    // updateQueue draws the waiting room of a voucher that has one: the
    // join button, then place, people ahead, progress and the estimated
    // wait, then the buy button at admission (pushed on the socket, no
    // reload). It says whether the buy button shows and a captcha is wanted.
    updateQueue(phase, now) {
      const v = this.voucher;
      const box = $('.queue', this.el);
      const join = this.joinButton;
      if (!v.waiting_room) {
        if (!box.hidden) box.hidden = true;
        if (!join.hidden) join.hidden = true;
        return { hideBuy: false, wantCaptcha: true, joinable: false };
      }
      if (box.hidden) box.hidden = false;
      const opens = Date.parse(v.begin_at) - (v.waiting_room.prequeue_seconds || 0) * 1000;
      // A sold-out line still takes joins and keeps places: units that
      // come back go to the line in order. Only the end closes it.
      const over = phase === 'ended';
      const joinable = now >= opens && !over && phase !== 'paused';
      let q = this.queue;
      let st = q ? q.state : 'none';
      if (st === 'won') st = 'admitted'; // a draw's winner holds a pass as the admitted do
      if (st === 'admitted' && !q.pass) st = 'used';
      if (st === 'admitted' && Date.parse(q.pass_expires_at) <= now) st = 'expired';
      if (st === 'none' && over) st = 'closed';
      const headline = $('.queue-headline', box);
      const bar = $('.queue-bar', box);
      const take = this.takeButton;
      const held = st === 'held' && Date.parse(q.held_until) > now;
      if (take.hidden === held) take.hidden = !held;
      if (held) {
        // A turn missed is held for the voucher's grace: reading the queue
        // again takes it (seckill/waitroom/README.md).
        box.dataset.state = 'held';
        const until = Date.parse(q.held_until);
        setText(headline, t('roomHeld', fmtHM(until), fmtDuration(until - now)));
        setText(take, t(this.taking ? 'takingTurn' : 'takeTurn'));
        take.disabled = this.taking;
        if (!join.hidden) join.hidden = true;
        return { hideBuy: true, wantCaptcha: true, joinable };
      }
      if (st === 'held') st = 'expired';
      if (v.waiting_room.mode === 'draw') return this.updateDraw(st, phase, now, headline, bar, box, join);
      box.dataset.state = st;
      let showJoin = false;
      switch (st) {
        case 'none':
          showJoin = true;
          if (!state.session) setText(headline, t('roomLogIn'));
          else if (now < opens) setText(headline, t('roomOpensIn', fmtDuration(opens - now)));
          else setText(headline, t('roomJoin'));
          bar.value = 0;
          break;
        case 'waiting': {
          const drawn = now < Date.parse(v.begin_at);
          setText(headline, drawn ? t('roomDrawn') : t('roomNumber', fmtNum(q.position)));
          setText($('.queue-position', box), fmtNum(q.position));
          setText($('.queue-ahead', box), fmtNum(q.ahead));
          // The estimate counts down between pushes.
          const eta = Math.max(0, q.eta_seconds * 1000 - (Date.now() - this.queueAt));
          setText($('.queue-eta', box), eta > 0 ? fmtDuration(eta) : t('anyMoment'));
          bar.max = Math.max(1, this.queueStart);
          bar.value = Math.max(0, this.queueStart - q.position);
          break;
        }
        case 'sold_out':
          setText(headline, t('roomSoldOut'));
          setText($('.queue-position', box), fmtNum(q.position));
          setText($('.queue-ahead', box), fmtNum(q.ahead));
          setText($('.queue-eta', box), t('whenUnitsBack'));
          break;
        case 'admitted':
          setText(headline, t('roomTurn', fmtDuration(Date.parse(q.pass_expires_at) - now)));
          bar.max = 1;
          bar.value = 1;
          break;
        case 'used':
          setText(headline, t('roomUsed'));
          bar.max = 1;
          bar.value = 1;
          break;
        case 'expired':
          setText(headline, t('roomExpired'));
          break;
        default:
          setText(headline, t('roomClosed'));
      }
      if (join.hidden === showJoin) join.hidden = !showJoin;
      setText(join, t(this.joining ? 'joining' : 'joinLine'));
      join.disabled = this.joining || !joinable || !state.session;
      return { hideBuy: st !== 'admitted', wantCaptcha: st === 'none' || st === 'admitted', joinable };
    }

    // updateDraw is updateQueue for a sale by draw: enter, then the draw's
    // result (won with a pass, waitlisted with a place, or lost) and the
    // shopper's own ticket beside the cut-off, to check by hand.
    updateDraw(st, phase, now, headline, bar, box, join) {
      const v = this.voucher;
      const q = this.queue;
      const begin = Date.parse(v.begin_at);
      const opens = begin - (v.waiting_room.prequeue_seconds || 0) * 1000;
      const d = v.draw || {};
      const joinable = now >= opens && now < begin && phase !== 'paused' && phase !== 'ended';
      if (st === 'closed') st = 'lost';
      box.dataset.state = st === 'admitted' ? 'won' : st;
      let showJoin = false;
      let text;
      switch (st) {
        case 'none':
          showJoin = true;
          if (!state.session) text = t('drawLogIn');
          else if (now < opens) text = t('drawOpensIn', fmtDuration(opens - now));
          else if (now < begin) text = t('drawEnter', fmtDuration(begin - now));
          else text = t('drawClosed');
          bar.value = 0;
          break;
        case 'entered':
          text = now < begin ? t('drawEntered', fmtDuration(begin - now)) : t('drawMaking');
          break;
        case 'admitted':
          text = t('drawWon', fmtDuration(Date.parse(q.pass_expires_at) - now));
          bar.max = 1;
          bar.value = 1;
          break;
        case 'used':
          text = t('drawUsed');
          break;
        case 'void':
          text = t('drawVoid');
          break;
        case 'waitlisted':
          text = t('drawWaitlisted', fmtNum(q.position));
          setText($('.queue-position', box), fmtNum(q.position));
          setText($('.queue-ahead', box), fmtNum(q.ahead));
          setText($('.queue-eta', box), t('whenUnitsBack'));
          break;
        default:
          text = t('drawOver');
      }
      if (d.void && st === 'none') text = t('drawVoidShort');
      if (q && q.entry_id && st !== 'void') text += t('drawEntry', q.entry_id.slice(0, 12));
      if (q && q.ticket && d.cutoff) text += t('drawTicket', q.ticket.slice(0, 12), d.cutoff.slice(0, 12));
      else if (d.beacon && !d.beacon.signature && !d.void) text += t('drawBeacon', d.beacon.round, fmtTime(Date.parse(d.beacon.round_at)));
      else if (d.commitment && !d.seed) text += t('drawCommitment', d.commitment.slice(0, 16));
      setText(headline, text);
      if (join.hidden === showJoin) join.hidden = !showJoin;
      setText(join, t(this.joining ? 'entering' : 'enterDraw'));
      join.disabled = this.joining || !joinable || !state.session;
      return { hideBuy: st !== 'admitted', wantCaptcha: st === 'none' || st === 'admitted', joinable };
    }

    // setQueue takes the shopper's place, answered or pushed.
    setQueue(q) {
      if (q && q.state === 'waiting' && (!this.queue || this.queue.state !== 'waiting' || q.position > this.queueStart)) {
        this.queueStart = q.position;
      }
      if (q && (q.state === 'admitted' || q.state === 'won') && q.pass && (!this.queue || this.queue.pass !== q.pass)) {
        this.notice(t('yourTurn', this.voucher ? this.voucher.title : ''), 'ok');
      }
      if (q && q.state === 'held' && q.held_until && (!this.queue || this.queue.state !== 'held')) {
        this.notice(t('heldNotice', this.voucher ? this.voucher.title : '', fmtHM(Date.parse(q.held_until))), 'warn');
      }
      if (q && this.queue && this.queue.state === 'entered' && (q.state === 'waitlisted' || q.state === 'lost')) {
        this.notice(t('drawLost', this.voucher ? this.voucher.title : '', q.state === 'waitlisted' ? q.position : 0), 'info');
      }
      this.queue = q;
      this.queueAt = Date.now();
      this.update();
    }

    // withCaptcha adds the captcha's id and the typed answer to a request
    // body when the voucher asks for them. It says false, after asking the
    // shopper to type the answer, when there is none yet.
    withCaptcha(body) {
      if (!this.voucher || !this.voucher.captcha_required) return true;
      const answer = this.answer.value.trim();
      if (!this.captcha.id || !answer) {
        this.notice(t('typeCaptchaFirst'), 'warn');
        this.answer.focus();
        return false;
      }
      body.captcha_id = this.captcha.id;
      body.captcha_answer = answer;
      return true;
    }

    async join() {
      const v = this.voucher;
      if (!v || this.joining) return;
      if (!state.session) {
        this.notice(t('logInFirstJoin'), 'warn');
        $('#username').focus();
        return;
      }
      const body = {};
      if (!this.withCaptcha(body)) return;
      const pow = v.challenge === 'pow';
      this.joining = true;
      this.update();
      try {
        if (pow) {
          // Joining a pow voucher's line takes a solved challenge, as a buy
          // does (gateway/openapi.yaml); its progress shows at .pow-status.
          if (this.pow && this.pow.failedAt) this.pow = null;
          Object.assign(body, await this.solvePow());
          this.pow = null; // spent by this join whatever the verdict
        }
        // A merchant who invites its shoppers links here with the entry
        // token it signed (?entry_token=...); the join carries it.
        const headers = entryToken() ? { 'Seckill-Entry-Token': entryToken() } : {};
        this.setQueue(await api('POST', `/vouchers/${encodeURIComponent(v.id)}/queue`, { body, headers }));
        this.notice(t('inLine'), 'ok');
      } catch (err) {
        if (err.code === 'unauthenticated') endSession(sentence(err));
        else this.notice(sentence(err, 'join'), err.code === 'captcha_invalid' || err.code === 'challenge_invalid' ? 'warn' : 'error');
        if (err.code === 'captcha_invalid') this.answer.focus();
      } finally {
        this.joining = false;
        if (v.captcha_required) this.loadCaptcha(false);
        this.update();
      }
    }

    // readQueue asks for the shopper's place (the socket just opened: it
    // also tells the instance holding the socket to push from now on).
    async readQueue() {
      const v = this.voucher;
      if (!v || !v.waiting_room || !state.session) return;
      try {
        this.setQueue(await api('GET', `/vouchers/${encodeURIComponent(v.id)}/queue`));
      } catch (err) {
        if (err.code === 'not_found') this.setQueue(null);
      }
    }

    // takeTurn brings back a shopper whose turn is held: reading the queue
    // again answers a fresh pass when a unit is free, which buys at once as
    // any pass does; else the place stays held, first for the next unit.
    async takeTurn() {
      const v = this.voucher;
      if (!v || this.taking) return;
      this.taking = true;
      this.update();
      try {
        this.setQueue(await api('GET', `/vouchers/${encodeURIComponent(v.id)}/queue`));
      } catch (err) {
        if (err.code === 'unauthenticated') endSession(sentence(err));
        else this.notice(sentence(err), 'error');
        return;
      } finally {
        this.taking = false;
        this.update();
      }
      const q = this.queue;
      if (q && q.pass) {
        this.buy();
        return;
      }
      if (q && q.state === 'held') this.notice(t('heldNext'), 'info');
    }

    // captchaFailedRecently keeps a failing captcha fetch from hammering.
    captchaFailedRecently() {
      const at = this.captcha.failedAt;
      return Boolean(at) && Date.now() - at < 10000;
    }

    // loadCaptcha shows a new captcha: a picture, or with kind 'audio' the
    // same kind of captcha read aloud (kept until the shopper asks for a
    // picture again).
    async loadCaptcha(byUser, kind) {
      const c = this.captcha;
      if (c.loading) return;
      c.loading = true;
      if (kind) c.kind = kind === 'audio' ? 'audio' : 'image';
      else if (byUser) c.kind = 'image';
      const audio = c.kind === 'audio';
      try {
        const res = await api('GET', audio ? '/captcha?kind=audio' : '/captcha', { auth: false });
        c.id = res.captcha_id;
        c.loadedAt = Date.now();
        c.failedAt = 0;
        const img = $('.captcha-img', this.el);
        const player = $('.captcha-audio', this.el);
        if (audio) player.src = res.audio;
        else img.src = res.image;
        img.hidden = audio;
        player.hidden = !audio;
        this.captchaLabels();
        $('.captcha-wait', this.el).hidden = true;
        this.answer.value = '';
        if (byUser) this.answer.focus();
      } catch (err) {
        c.failedAt = Date.now();
        setKeyed($('.captcha-wait', this.el), 'captchaPicFail');
        if (byUser) this.notice(t('captchaLoadFail', sentence(err, 'captcha')), 'error');
      } finally {
        c.loading = false;
      }
    }

    // captchaLabels names the captcha's field and buttons for what it shows
    // (a picture or a recording); the keys follow a change of language.
    captchaLabels() {
      const audio = this.captcha.kind === 'audio';
      setKeyed($('.captcha-label', this.el), audio ? 'captchaDigits' : 'captchaChars');
      setKeyed($('.captcha-refresh', this.el), audio ? 'showPicture' : 'newPicture');
      setKeyed($('.captcha-listen', this.el), audio ? 'listenNew' : 'listenInstead');
    }

    async buy() {
      const v = this.voucher;
      if (!v || this.inflight || Date.now() < this.waitUntil || Date.now() < this.doneUntil) return;
      if (!state.session) {
        this.notice(t('logInFirstBuy'), 'warn');
        $('#username').focus();
        return;
      }
      const qty = Number(this.qty.value);
      const max = Number(this.qty.max);
      if (!Number.isInteger(qty) || qty < 1 || qty > max) {
        this.notice(t('chooseQty', fmtNum(max)), 'warn');
        this.qty.focus();
        return;
      }
      const body = { quantity: qty };
      if (!this.withCaptcha(body)) return;
      const pow = v.challenge === 'pow';
      /** @type {Record<string, string>} */
      const headers = {};
      if (v.waiting_room) {
        if (!this.queue || !this.queue.pass) {
          this.notice(sentence({ code: 'not_admitted' }), 'warn');
          return;
        }
        headers['Seckill-Pass'] = this.queue.pass;
      }
      // One key per intent: a retry of the same intent (double click, network
      // error, waiting out a 429) sends the same key, so it buys once.
      if (!this.intent || this.intent.qty !== qty) this.intent = { key: uuid(), qty, tries: 0 };
      headers['Idempotency-Key'] = this.intent.key;
      this.intent.tries++;
      this.inflight = true;
      this.el.setAttribute('aria-busy', 'true');
      this.update();
      let spent = true; // whether the captcha was used up by this try
      const sentAt = Date.now();
      try {
        if (pow) {
          // A press asks again at once even if the last fetch failed; only
          // the page's own polling waits out a failure.
          if (this.pow && this.pow.failedAt) this.pow = null;
          Object.assign(body, await this.solvePow());
        }
        const res = await api('POST', `/vouchers/${encodeURIComponent(v.id)}/orders`, {
          body,
          headers,
        });
        if (v.waiting_room && this.queue) this.queue = { ...this.queue, pass: null }; // used
        learnServerTime(Date.parse(v.begin_at), true, sentAt, Date.now());
        this.intent = null;
        this.doneUntil = Date.now() + 1500;
        upsertOrder({
          order_id: String(res.order_id),
          voucher_id: v.id,
          user_id: state.session.userId,
          quantity: qty,
          amount_cents: qty * v.price_cents,
          status: res.status || 'reserved',
          created_at: new Date(serverNow()).toISOString(),
          pay_deadline: null,
          payment: null,
        }, false);
        this.notice(t('gotIt', shortRef(res.order_id)), 'ok');
        // Announced whichever comes first, this read or the socket's push:
        // a shopper who cannot see the list hears the order confirmed.
        fetchOrder(String(res.order_id), true);
        scheduleVouchers(300);
      } catch (err) {
        if (err.code === 'not_started') learnServerTime(Date.parse(v.begin_at), false, sentAt, Date.now());
        spent = !['rate_limited', 'network', 'unauthenticated'].includes(err.code);
        this.buyFailed(err);
      } finally {
        this.inflight = false;
        this.el.removeAttribute('aria-busy');
        if (v.captcha_required && spent) this.loadCaptcha(false);
        if (pow && spent) this.pow = null; // update() starts the next one
        this.update();
      }
    }

    // solvePow gets a challenge for a pow voucher and solves it in a Web
    // Worker (pow.js); it answers the buy's {challenge_id,
    // challenge_answer}. One solve is shared by every caller until a buy
    // spends it or it nears its expiry; a failure is kept 10 s, so a page
    // that cannot reach the shop does not ask again every second.
    solvePow() {
      const p = this.pow;
      if (p && (p.failedAt ? Date.now() - p.failedAt < 10000 : !p.expiresAt || p.expiresAt - serverNow() > 15000)) {
        return p.promise;
      }
      const v = this.voucher;
      const status = $('.pow-status', this.el);
      const pow = { expiresAt: 0, failedAt: 0, promise: null };
      this.pow = pow;
      pow.promise = (async () => {
        const ch = await api('GET', `/challenges?voucher_id=${encodeURIComponent(v.id)}`, { auth: false });
        pow.expiresAt = Date.parse(ch.expires_at);
        const nonce = await solveWork(ch, (ms) => setText(status, t('powChecking', fmtNum(Math.round(ms / 1000)))));
        setText(status, '');
        this.el.dataset.pow = 'ready';
        return { challenge_id: ch.challenge_id, challenge_answer: nonce };
      })();
      pow.promise.catch(() => { pow.failedAt = Date.now(); setText(status, ''); });
      delete this.el.dataset.pow;
      return pow.promise;
    }

    // buyFailed shows a refusal at the card: what happened and what to do
    // next. A Retry-After (429, 503) greys the button out and counts down
    // beside it until it comes back.
    buyFailed(err) {
      const warn = (text) => this.notice(text, 'warn');
      switch (err.code) {
        case 'rate_limited': {
          const wait = err.retryAfter || 1;
          this.waitUntil = Date.now() + wait * 1000;
          // Waited out, then retried with the same key, a few times at most.
          this.retryAfterWait = this.intent && this.intent.tries < 5;
          warn(this.retryAfterWait ? sentence(err) : t('tooManyWait', fmtNum(wait)));
          return;
        }
        case 'unavailable':
          // The shop is busy: the card says so until the wait is over.
          this.waitUntil = Date.now() + (err.retryAfter || 2) * 1000;
          this.el.dataset.notice = 'busy';
          warn(sentence({ ...err, retryAfter: err.retryAfter || 2 }));
          return;
        case 'sale_paused': {
          // The socket brings the end of the pause; keep the intent, so
          // pressing Buy again then cannot buy twice.
          const v = this.voucher;
          if (v) state.vouchers.set(v.id, { ...v, state: 'paused' });
          warn(sentence(err));
          this.update();
          return;
        }
        case 'network':
          this.notice(t('networkBuy'), 'error');
          return;
        case 'sold_out':
          this.soldOut = true;
          this.intent = null;
          warn(sentence(err));
          scheduleVouchers(300);
          return;
        case 'captcha_invalid':
        case 'challenge_invalid':
          // The answer is spent: the field is emptied for the new picture
          // (or the device check runs again) and takes the focus.
          warn(sentence(err, this.voucher && this.voucher.captcha_required ? 'captcha' : 'buy'));
          if (this.voucher && this.voucher.captcha_required) {
            this.answer.value = '';
            this.answer.focus();
          }
          return;
        case 'unauthenticated':
          endSession(sentence(err));
          return;
        case 'not_started':
        case 'ended':
        case 'not_found':
          this.intent = null;
          warn(sentence(err));
          scheduleVouchers(0);
          return;
        case 'limit_exceeded':
        case 'unpaid_limit':
          this.intent = null;
          warn(sentence(err));
          return;
        case 'not_admitted':
          this.intent = null;
          warn(sentence(err));
          this.readQueue();
          return;
        default:
          this.intent = null;
          this.notice(sentence(err, 'buy'), 'error');
      }
    }
  }

  /**
   * solveWork finds a challenge's nonce in a Web Worker (pow.js). progress
   * hears the milliseconds spent about every second: only slow devices
   * hear it, a fast one is done within a second.
   * @param {{salt: string, difficulty_bits: number}} ch
   * @param {(ms: number) => void} progress
   * @returns {Promise<string>}
   */
  function solveWork(ch, progress) {
    return new Promise((resolve, reject) => {
      let w;
      try { w = new Worker('pow.js'); } catch (e) { reject(new ApiError(0, 'pow_failed', String(e), 0)); return; }
      w.onmessage = (ev) => {
        const m = ev.data || {};
        if (m.progress) {
          progress(m.ms);
          return;
        }
        w.terminate();
        if (m.error) reject(new ApiError(0, 'pow_failed', m.error, 0));
        else resolve(m.nonce);
      };
      w.onerror = (e) => { w.terminate(); reject(new ApiError(0, 'pow_failed', e.message || 'worker', 0)); };
      w.postMessage({ salt: ch.salt, bits: ch.difficulty_bits });
    });
  }

  function newCard(v) {
    const card = new Card(v);
    if (v.waiting_room && socket.isLive()) setTimeout(() => card.readQueue(), 0);
    return card;
  }

  /**
   * applyQueue takes a place in line pushed on the socket.
   * @param {Queue} q
   */
  function applyQueue(q) {
    if (!q || q.voucher_id === undefined) return;
    const card = state.cards.get(String(q.voucher_id));
    if (card) card.setQueue(q);
  }

  let vouchersTimer = 0;

  function scheduleVouchers(delay) {
    clearTimeout(vouchersTimer);
    vouchersTimer = setTimeout(refreshVouchers, delay);
  }

  // The catalog is read once, and again each time the socket (re)opens;
  // while it is open every change of stock or state arrives on it, so the
  // page does not poll. Only while the socket is down is the catalog read
  // again, every 30 s (a crowd of open pages must not poll the shop).
  const FALLBACK_REFRESH = 30000;

  // showUpdated says whether the list is live or as of when it was read.
  function showUpdated() {
    const at = state.vouchersReadAt;
    setText($('#vouchers-updated'), socket.isLive() ? t('vouchersLive') : at ? t('updatedAt', fmtTime(at)) : '');
  }

  async function refreshVouchers() {
    clearTimeout(vouchersTimer);
    let next = FALLBACK_REFRESH;
    try {
      // The plain address: its page is built once per change of the catalog.
      applyVouchers(/** @type {Voucher[]} */ (await apiList('/vouchers', { auth: false })));
      state.vouchersReadAt = serverNow();
      showUpdated();
    } catch (err) {
      if (!state.vouchersLoadedOnce) {
        setKeyed($('#vouchers-empty'), 'vouchersLoadFail');
        $('#vouchers').setAttribute('aria-busy', 'false');
        next = 5000;
      }
    }
    if (!socket.isLive()) scheduleVouchers(next + Math.random() * 1000);
  }

  // applyVoucher takes one voucher pushed on the socket: its live stock and
  // state, or a voucher new to the page (placed in its group: sortCards).
  function applyVoucher(raw) {
    if (!raw || raw.id === undefined) return;
    const v = { ...raw, id: String(raw.id) };
    const was = state.vouchers.get(v.id);
    state.vouchers.set(v.id, v);
    let card = state.cards.get(v.id);
    const drawnOf = (x) => !!(x && x.draw && ((x.draw.beacon && x.draw.beacon.signature) || x.draw.seed || x.draw.void));
    if (card && drawnOf(v) && !drawnOf(was) && card.queue) {
      card.readQueue(); // the draw is made (or void): the entrant's result
    }
    if (!card) {
      if (!state.vouchersLoadedOnce) return; // the list on its way has it
      card = newCard(v);
      state.cards.set(v.id, card);
      $('#vouchers').append(card.el);
      $('#vouchers-empty').hidden = true;
    }
    card.render();
  }

  /** @param {Voucher[]} list the whole catalog, newest first */
  function applyVouchers(list) {
    state.vouchersLoadedOnce = true;
    const grid = $('#vouchers');
    grid.setAttribute('aria-busy', 'false');
    const seen = new Set();
    for (const raw of list) {
      const v = { ...raw, id: String(raw.id) };
      seen.add(v.id);
      state.vouchers.set(v.id, v);
      let card = state.cards.get(v.id);
      if (!card) {
        card = newCard(v);
        state.cards.set(v.id, card);
      }
      if (!card.el.parentElement) grid.append(card.el);
      card.render();
    }
    for (const [id, card] of state.cards) {
      if (!seen.has(id)) {
        card.el.remove();
        state.cards.delete(id);
        state.vouchers.delete(id);
      }
    }
    sortCards();
    const empty = $('#vouchers-empty');
    setKeyed(empty, 'nothingOnSale');
    empty.hidden = list.length > 0;
    if (!empty.hidden && empty.parentElement !== grid) grid.append(empty);
    for (const o of state.orders.values()) renderOrder(o); // titles may have arrived
  }

  // sortCards orders the cards by GROUP (live, upcoming, over), newest
  // first within a group as the catalog is. A card under the focus or the
  // mouse is never moved: the others move around it, and the page scrolls
  // by what it would have shifted, so it stays under the pointer (moving a
  // node would also drop the focus inside it).
  function sortCards() {
    const grid = $('#vouchers');
    const want = [...state.cards.values()]
      .sort((a, b) => (a.group - b.group) || compareIds(b.id, a.id))
      .map((c) => c.el);
    const have = [...grid.children].filter((el) => el instanceof HTMLElement && el.dataset.voucherId);
    if (have.length === want.length && have.every((el, i) => el === want[i])) return;
    const active = document.activeElement;
    let anchor = active && active !== document.body && grid.contains(active) ? active.closest('[data-voucher-id]') : null;
    if (!anchor && state.hovered && want.includes(state.hovered)) anchor = state.hovered;
    const at = anchor ? want.indexOf(anchor) : -1;
    if (at < 0) {
      let prev = null;
      for (const el of want) {
        const next = prev ? prev.nextElementSibling : grid.firstElementChild;
        if (next !== el) grid.insertBefore(el, next);
        prev = el;
      }
      return;
    }
    const top = anchor.getBoundingClientRect().top;
    let after = anchor;
    for (let i = at - 1; i >= 0; i--) {
      if (after.previousElementSibling !== want[i]) grid.insertBefore(want[i], after);
      after = want[i];
    }
    let before = anchor;
    for (let i = at + 1; i < want.length; i++) {
      if (before.nextElementSibling !== want[i]) before.after(want[i]);
      before = want[i];
    }
    const shift = anchor.getBoundingClientRect().top - top;
    if (shift) window.scrollBy(0, shift);
  }

  // sortSoon sorts once after the cards of this turn have drawn their phase.
  let sortQueued = false;
  function sortSoon() {
    if (sortQueued) return;
    sortQueued = true;
    queueMicrotask(() => {
      sortQueued = false;
      if (state.vouchersLoadedOnce) sortCards();
    });
  }

  // ---- Orders -------------------------------------------------------------

  function compareIds(a, b) { // decimal strings, beyond 2^53
    if (a.length !== b.length) return a.length - b.length;
    return a < b ? -1 : a > b ? 1 : 0;
  }

  // upsertOrder merges one order from any source (REST, snapshot, push).
  // announce says whether a change is news worth saying aloud.
  /**
   * @param {Order} raw
   * @param {boolean} announce
   */
  function upsertOrder(raw, announce) {
    if (!raw || raw.order_id === undefined) return;
    const o = { ...raw, order_id: String(raw.order_id), voucher_id: String(raw.voucher_id) };
    if (state.session && raw.user_id !== undefined && String(raw.user_id) !== state.session.userId) return;
    const old = state.orders.get(o.order_id);
    if (old) {
      if ((RANK[o.status] ?? 0) < (RANK[old.status] ?? 0)) return; // stale
      if (!o.pay_deadline && old.pay_deadline) o.pay_deadline = old.pay_deadline;
    }
    state.orders.set(o.order_id, o);
    renderOrder(o);
    updateOrdersEmpty();
    if (announce && old && old.status !== o.status) {
      const news = ['created', 'paid', 'cancelled', 'failed', 'refunded'].includes(o.status) ? t(`news_${o.status}`, shortRef(o.order_id)) : '';
      if (news) say(news, o.status === 'failed' || o.status === 'cancelled' ? 'warn' : 'ok');
      if (o.status === 'failed' || o.status === 'cancelled') scheduleVouchers(300); // stock came back
    }
  }

  function renderOrder(o) {
    let li = state.orderEls.get(o.order_id);
    if (!li) {
      li = $('#order-template').content.firstElementChild.cloneNode(true);
      li.dataset.orderId = o.order_id;
      $('.pay', li).addEventListener('click', (ev) => payOrCancel(o.order_id, 'pay', ev.currentTarget));
      $('.cancel', li).addEventListener('click', (ev) => payOrCancel(o.order_id, 'cancel', ev.currentTarget));
      state.orderEls.set(o.order_id, li);
      // Newest first: ids are time-ordered.
      const list = $('#orders');
      let before = null;
      for (const other of list.children) {
        if (compareIds(other.dataset.orderId, o.order_id) < 0) { before = other; break; }
      }
      list.insertBefore(li, before);
    }
    const v = state.vouchers.get(o.voucher_id);
    setText($('.order-title', li), v ? v.title : t('voucherN', o.voucher_id));
    setText($('.order-qty', li), t('orderQty', fmtNum(o.quantity)));
    // An order is charged in its voucher's currency (or its payment's).
    const currency = (v && v.currency) || (o.payment && o.payment.currency) || '';
    setText($('.order-amount', li), fmtMoney(o.amount_cents, currency.toUpperCase()));
    setText($('.order-ref', li), t('orderRef', shortRef(o.order_id)));
    $('.order-ref', li).title = o.order_id;
    li.dataset.status = o.status;
    const st = $('.status', li);
    setText(st, t(`status_${o.status}`));
    st.dataset.status = o.status;
    const payable = o.status === 'created';
    $('.pay', li).hidden = !payable;
    $('.cancel', li).hidden = !payable;
    $('.pay', li).setAttribute('aria-label', t('payOrder', shortRef(o.order_id)));
    $('.cancel', li).setAttribute('aria-label', t('cancelOrder', shortRef(o.order_id)));
    updateDeadline(o, li);
  }

  function updateDeadline(o, li) {
    const el = $('.deadline', li);
    if (o.status !== 'created') {
      setText(el, o.status === 'created' || MESSAGES.en[`hint_${o.status}`] === undefined ? '' : t(`hint_${o.status}`));
      el.dataset.urgent = 'false';
      return;
    }
    const deadline = o.pay_deadline ? Date.parse(o.pay_deadline) : NaN;
    if (Number.isNaN(deadline)) {
      setText(el, t('waitingPayment'));
      return;
    }
    const left = deadline - serverNow();
    const pay = $('.pay', li);
    if (left <= 0) {
      setText(el, t('payRunOut'));
      el.dataset.urgent = 'true';
      if (!pay.disabled) pay.disabled = true;
      return;
    }
    setText(el, t('payWithin', fmtDuration(left)));
    el.dataset.urgent = String(left < 60000);
    if (pay.disabled && !pay.hasAttribute('aria-busy')) pay.disabled = false;
  }

  function updateOrdersEmpty() {
    $('#orders-empty').hidden = state.orders.size > 0;
  }

  async function refreshOrders() {
    if (!state.session) return;
    try {
      for (const o of /** @type {Order[]} */ (await apiList('/orders?limit=100'))) upsertOrder(o, false);
    } catch (err) {
      if (err.code === 'unauthenticated') endSession(sentence(err));
    }
  }

  async function fetchOrder(id, announce = false) {
    try {
      upsertOrder(await api('GET', `/orders/${encodeURIComponent(id)}`), announce);
    } catch (err) {
      if (err.code === 'unauthenticated') endSession(sentence(err));
    }
  }

  function payOrCancel(id, action, button) {
    withButton(button, async () => {
      try {
        const o = await api('POST', `/orders/${encodeURIComponent(id)}/${action}`);
        upsertOrder(o, false);
        say(t(action === 'pay' ? 'paidThanks' : 'cancelledBack', shortRef(id)), 'ok');
        if (action === 'cancel') scheduleVouchers(300);
      } catch (err) {
        if (err.code === 'unauthenticated') { endSession(sentence(err)); return; }
        say(sentence(err, action === 'pay' || action === 'cancel' ? action : 'order'), 'error');
        fetchOrder(id); // show what the order really is now
      }
    });
  }

  // ---- Socket -------------------------------------------------------------
  // Order status arrives here: on connect the server sends every non-final
  // order, then every change. We reconnect with exponential backoff and
  // jitter, ping to find dead connections, and re-read the order list on
  // every (re)connect, since orders that ended while we were away are not
  // in the snapshot.

  const socket = {
    ws: null,
    attempt: 0,
    retryTimer: 0,
    pingTimer: 0,
    lastHeard: 0,
    openedAt: 0,
    PING_EVERY: 20000,
    DEAD_AFTER: 30000,

    shown: 'offline',
    shownSecs: 0,

    // setState shows the socket's state s (offline|connecting|live|
    // reconnecting, the last in secs).
    setState(s, secs = 0) {
      this.shown = s;
      this.shownSecs = secs;
      const el = $('#ws-state');
      el.dataset.state = s;
      const key = { offline: 'wsOffline', connecting: 'wsConnecting', live: 'wsLive' }[s];
      setText(el, key ? t(key) : t('wsReconnecting', fmtNum(secs)));
    },

    connect() {
      clearTimeout(this.retryTimer);
      if (this.ws) return;
      if (state.session && state.session.expiresAt && serverNow() >= state.session.expiresAt) {
        endSession(t('sessionEnded'));
        return;
      }
      const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
      // Without a session the socket is public: voucher changes only.
      const query = state.session ? `?token=${encodeURIComponent(state.session.token)}` : '';
      const url = `${scheme}//${location.host}${API}/ws${query}`;
      let ws;
      try {
        ws = new WebSocket(url);
      } catch (e) {
        this.retry();
        return;
      }
      this.ws = ws;
      this.setState('connecting');
      ws.onopen = () => {
        this.openedAt = Date.now();
        this.lastHeard = Date.now();
        this.setState('live');
        this.startPings();
        if (state.session) refreshOrders();
        refreshVouchers(); // what changed while the socket was down
        if (state.session) for (const card of state.cards.values()) card.readQueue();
      };
      ws.onmessage = (ev) => {
        this.lastHeard = Date.now();
        if (this.openedAt && Date.now() - this.openedAt > 10000) this.attempt = 0; // it held: reset backoff
        let msg;
        try { msg = JSON.parse(ev.data); } catch (e) { return; }
        if (msg && msg.type === 'order') upsertOrder(msg.order, true);
        else if (msg && msg.type === 'queue') applyQueue(msg.queue);
        else if (msg && msg.type === 'voucher') applyVoucher(msg.voucher);
      };
      ws.onclose = () => this.closed(ws);
      ws.onerror = () => { /* onclose follows */ };
    },

    closed(ws) {
      if (this.ws !== ws) return;
      this.ws = null;
      clearInterval(this.pingTimer);
      if (this.openedAt && Date.now() - this.openedAt > 10000) this.attempt = 0;
      this.openedAt = 0;
      scheduleVouchers(FALLBACK_REFRESH);
      this.retry();
    },

    isLive() {
      return Boolean(this.ws) && this.ws.readyState === WebSocket.OPEN;
    },

    // reopen starts a new socket: a session began or ended, and the
    // socket's token must follow.
    reopen() {
      this.disconnect();
      this.connect();
    },

    retry() {
      clearTimeout(this.retryTimer);
      this.attempt++;
      // Exponential backoff with jitter, so a fleet restart does not bring
      // every shopper back in the same second.
      const ceiling = Math.min(30000, 500 * 2 ** Math.min(this.attempt - 1, 10));
      const delay = ceiling / 2 + Math.random() * (ceiling / 2);
      this.setState('reconnecting', Math.ceil(delay / 1000));
      // The browser hides why a handshake failed; after a few failures ask
      // the API whether the token is still good.
      if (this.attempt >= 3 && state.session) refreshOrders();
      this.retryTimer = setTimeout(() => this.connect(), delay);
    },

    startPings() {
      clearInterval(this.pingTimer);
      this.pingTimer = setInterval(() => {
        const ws = this.ws;
        if (!ws || ws.readyState !== WebSocket.OPEN) return;
        if (Date.now() - this.lastHeard > this.DEAD_AFTER) {
          // No pong: the connection is dead even if the browser has not
          // noticed. Do not wait for a close handshake that will not come.
          ws.onclose = null;
          ws.close();
          this.closed(ws);
          return;
        }
        try { ws.send(JSON.stringify({ type: 'ping' })); } catch (e) { /* onclose follows */ }
      }, this.PING_EVERY / 2);
    },

    disconnect() {
      clearTimeout(this.retryTimer);
      clearInterval(this.pingTimer);
      const ws = this.ws;
      this.ws = null;
      this.attempt = 0;
      if (ws) {
        ws.onclose = null;
        ws.close(1000, 'logged out');
      }
      this.setState('offline');
    },

    // nudge reconnects at once when the network or the tab comes back.
    nudge() {
      if (!this.ws) {
        this.attempt = 0;
        this.connect();
      }
    },
  };

  // ---- Clock tick -----------------------------------------------------------

  function tick() {
    setText($('#server-clock'), fmtTime(serverNow()));
    for (const card of state.cards.values()) card.update();
    for (const [id, li] of state.orderEls) updateDeadline(state.orders.get(id), li);
    if (state.session && state.session.expiresAt && serverNow() >= state.session.expiresAt) {
      endSession(t('sessionEnded'));
    }
  }

  // ---- Start --------------------------------------------------------------

  // applyLang shows the page in the language chosen: <html lang>, the
  // static text, and everything drawn from data, which is drawn again.
  function applyLang() {
    document.documentElement.lang = lang;
    translateStatic(document);
    for (const tpl of document.querySelectorAll('template')) translateStatic(tpl.content);
    document.title = t('pageTitle');
    const select = $('#lang');
    if (select.value !== lang) select.value = lang;
  }

  // setLang switches the language and remembers it for the next visit.
  function setLang(l) {
    lang = LANGS.includes(l) ? l : 'en';
    try { localStorage.setItem(LANG_KEY, lang); } catch (e) { /* storage blocked: this visit only */ }
    applyLang();
    socket.setState(socket.shown, socket.shownSecs);
    showUpdated();
    say('', 'info');
    for (const card of state.cards.values()) {
      card.captchaLabels();
      card.clearNotice();
      card.render();
    }
    for (const o of state.orders.values()) renderOrder(o);
    tick();
  }

  function start() {
    applyLang();
    $('#lang').addEventListener('change', (ev) => setLang(/** @type {HTMLSelectElement} */ (ev.currentTarget).value));
    // The card under the mouse stays put when the list is sorted.
    const grid = $('#vouchers');
    grid.addEventListener('pointerover', (ev) => {
      if (ev.pointerType === 'mouse' && ev.target instanceof Element) state.hovered = ev.target.closest('[data-voucher-id]');
    });
    grid.addEventListener('pointerleave', () => { state.hovered = null; });
    $('#auth-form').addEventListener('submit', onLogin);
    $('#register').addEventListener('click', onRegister);
    $('#login-captcha-refresh').addEventListener('click', () => loginCaptcha.load());
    $('#logout').addEventListener('click', () => {
      setSession(null);
      say(t('loggedOut'), 'info');
      $('#username').focus();
    });
    window.addEventListener('online', () => { socket.nudge(); });
    document.addEventListener('visibilitychange', () => {
      if (!document.hidden) socket.nudge();
    });
    setSession(loadSession());
    refreshVouchers();
    tick();
    setInterval(tick, 250);
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
