package i18n

// chinese is the Simplified Chinese of an English sentence, found by its
// format; verbs (%d, %s, %q, ...) stay, in the same order, or are indexed
// (%[2]d) where Chinese puts them otherwise. Words that fill a %s of
// another sentence (a JSON type, a piece of advice) are here too.
func chinese(format string) (string, bool) {
	switch format {
	case "too many failed logins for this username: get a captcha (GET /api/v1/captcha) and send its captcha_id and captcha_answer with the username and password":
		return "该用户名登录失败次数过多：请先获取验证码（GET /api/v1/captcha），再将 captcha_id 和 captcha_answer 与用户名、密码一起提交", true
	case "the captcha answer is missing, wrong or expired: get a new captcha (GET /api/v1/captcha) and log in with its answer":
		return "验证码答案缺失、错误或已过期：请获取新的验证码（GET /api/v1/captcha），并用其答案登录", true
	case "registering takes a solved captcha: get one (GET /api/v1/captcha) and send its captcha_id and captcha_answer with the username and password":
		return "注册需要完成验证码：请获取验证码（GET /api/v1/captcha），再将 captcha_id 和 captcha_answer 与用户名、密码一起提交", true
	case "registration takes a captcha, and this server has none":
		return "注册需要验证码，但本服务器未提供验证码", true
	case "the captcha answer is wrong, expired or used: get a new captcha (GET /api/v1/captcha) and register with its answer":
		return "验证码答案错误、已过期或已被使用：请获取新的验证码（GET /api/v1/captcha），并用其答案注册", true
	case "waiting_room.draw_hold needs a payment provider that holds money (SECKILL_PAYMENT_PROVIDER=stripe)":
		return "waiting_room.draw_hold 需要支持预授权的支付服务商（SECKILL_PAYMENT_PROVIDER=stripe）", true
	case "state must be \"paused\" or \"on_sale\"":
		return "state 必须为 \"paused\" 或 \"on_sale\"", true
	case "this voucher is not sold by draw, so it has no entries: only a voucher whose waiting room's mode is draw has them":
		return "该优惠券不以抽签方式销售，因此没有报名记录：只有排队室模式为 draw 的优惠券才有", true
	case "the draws are not available on this server":
		return "本服务器不提供抽签功能", true
	case "this server keeps no record of operators' changes, so it cannot honour an Idempotency-Key: send the change without one":
		return "本服务器不记录运营人员的操作，无法支持 Idempotency-Key：请去掉该请求头后再提交", true
	case "this Idempotency-Key was used for another request (trail entry %d, %s); a key names one change: send a new key for a new change":
		return "该 Idempotency-Key 已用于另一个请求（操作记录第 %d 条，%s）；一个键只对应一次变更：新的变更请使用新的键", true
	case "the change of this Idempotency-Key was made (trail entry %d) but its answer was not kept; read what it changed (%s) to see it":
		return "该 Idempotency-Key 对应的变更已完成（操作记录第 %d 条），但未保存其响应；请查看被修改的对象（%s）确认结果", true
	case "the username must be %d to %d letters, digits, '_', '.' or '-'":
		return "用户名须为 %d 到 %d 个字母、数字、“_”、“.”或“-”", true
	case "username and password are required":
		return "请填写用户名和密码", true
	case "the password must be %d to %d characters long":
		return "密码长度须为 %d 到 %d 个字符", true
	case "the username or password is wrong":
		return "用户名或密码错误", true
	case "sign in first":
		return "请先登录", true
	case "your session has expired; please sign in again":
		return "登录已过期，请重新登录", true
	case "the request body is over the limit of %d bytes":
		return "请求体超过 %d 字节的上限", true
	case "the request's URL and headers are over the limit of %d bytes":
		return "请求的 URL 和请求头超过 %d 字节的上限", true
	case "the waiting room is not available on this server":
		return "本服务器不提供排队功能", true
	case "the Idempotency-Key header must be at most %d characters":
		return "Idempotency-Key 请求头最多 %d 个字符", true
	case "the Idempotency-Key header must be visible ASCII characters without spaces":
		return "Idempotency-Key 请求头只能包含不含空格的可见 ASCII 字符", true
	case "challenge_answer must be the nonce: up to 20 decimal digits":
		return "challenge_answer 必须是 nonce：最多 20 位十进制数字", true
	case "kind must be image or audio":
		return "kind 必须为 image 或 audio", true
	case "name the challenge: send voucher_id (to buy or join that voucher) or purpose=register (to sign up)":
		return "请指明要哪种挑战：提交 voucher_id（用于购买或排队该优惠券）或 purpose=register（用于注册）", true
	case "voucher %d takes no proof of work (its challenge is %s): buy it without one":
		return "优惠券 %d 不需要工作量证明（其验证方式为 %s）：请直接购买", true
	case "state must be one of scheduled, on_sale, paused, sold_out and ended":
		return "state 必须为 scheduled、on_sale、paused、sold_out 或 ended 之一", true
	case "entries to this voucher cannot be checked on this server":
		return "本服务器无法校验该优惠券的参与资格", true
	case "this voucher takes no allowlist: create it with entry.allowlist set":
		return "该优惠券不使用白名单：请在创建时设置 entry.allowlist", true
	case "allowlists are not available on this server":
		return "本服务器不提供白名单功能", true
	case "the allowlist changed, but its entry in the operators' trail was not written; send the change again":
		return "白名单已修改，但操作记录未能写入；请重新提交该变更", true
	case "user_ids or person_keys must name at least one entry":
		return "user_ids 或 person_keys 至少须包含一项", true
	case "one upload carries at most %d entries; send a longer list in several":
		return "每次上传最多 %d 项；更长的名单请分多次上传", true
	case "user_ids/%d must be a user id (a positive integer as a string)":
		return "user_ids/%d 必须是用户 ID（以字符串表示的正整数）", true
	case "person_keys/%d must be 1 to %d bytes":
		return "person_keys/%d 的长度须为 1 到 %d 字节", true
	case "the request is not valid":
		return "请求无效", true
	case "the challenge answer is missing, wrong or expired; get a new challenge and try again":
		return "验证答案缺失、错误或已过期，请获取新的验证后重试", true
	case "the event's signature is missing, wrong or too old":
		return "事件签名缺失、错误或已过期", true
	case "the event's amount or currency is not its payment's":
		return "事件的金额或币种与支付记录不符", true
	case "the captcha answer is missing, wrong or expired; get a new captcha and try again":
		return "验证码答案缺失、错误或已过期，请获取新的验证码后重试", true
	case "the proof-of-work answer is missing, wrong, expired or used; get a new challenge and try again":
		return "工作量证明答案缺失、错误、已过期或已被使用，请获取新的验证后重试", true
	case "please sign in first":
		return "请先登录", true
	case "you are not allowed to do this":
		return "你无权执行此操作", true
	case "this voucher has a waiting room: join its line, and buy with the pass you get when admitted":
		return "该优惠券需要排队：请先加入队列，轮到你后凭获得的通行证购买", true
	case "this voucher takes entries only with a valid entry token from its merchant, or from its allowlist":
		return "该优惠券仅接受持有商家有效参与凭证或在白名单中的用户", true
	case "too many of your holds expired unpaid or were cancelled recently; you may buy again later":
		return "你最近有过多订单超时未付款或被取消，请稍后再购买", true
	case "we could not find what you asked for":
		return "找不到你请求的内容", true
	case "this voucher is sold out":
		return "已售罄", true
	case "you have reached the limit for this voucher":
		return "你已达到该优惠券的限购数量", true
	case "the sale has not started yet":
		return "活动尚未开始", true
	case "the sale has ended":
		return "活动已结束", true
	case "the order cannot change that way in its current state":
		return "订单当前状态不允许此操作", true
	case "that username is taken; please choose another":
		return "该用户名已被占用，请换一个", true
	case "the request body is too large":
		return "请求体过大", true
	case "too many requests; please wait a moment and try again":
		return "请求过于频繁，请稍后重试", true
	case "the sale of this voucher is paused for a moment; please try again shortly":
		return "该优惠券的销售已暂停，请稍后重试", true
	case "the service is busy right now; please try again shortly":
		return "服务繁忙，请稍后重试", true
	case "this address does not accept that method":
		return "该地址不支持此请求方法", true
	case "something went wrong on our side; please try again":
		return "服务器出现问题，请重试", true
	case "there is nothing at this address":
		return "该地址不存在", true
	case "the body holds only white space: send a JSON object, or no body at all":
		return "请求体只有空白：请发送 JSON 对象，或不带请求体", true
	case "the request needs a JSON body":
		return "该请求需要 JSON 请求体", true
	case "send the body as JSON (Content-Type: application/json)":
		return "请以 JSON 格式发送请求体（Content-Type: application/json）", true
	case "the body must hold exactly one JSON object":
		return "请求体必须恰好包含一个 JSON 对象", true
	case "the body must be a JSON object":
		return "请求体必须是 JSON 对象", true
	case "field %q appears more than once: send each field once":
		return "字段 %q 出现了多次：每个字段只能出现一次", true
	case "field %q must not be null":
		return "字段 %q 不能为 null", true
	case "the body must not hold null":
		return "请求体不能包含 null", true
	case "the body is not valid JSON":
		return "请求体不是有效的 JSON", true
	case "field %q must be %s":
		return "字段 %q 必须是%s", true
	case "unknown field %s":
		return "未知字段 %s", true
	case "the body has a value of the wrong type or an unknown field":
		return "请求体包含类型错误的值或未知字段", true
	case "%s must be a positive decimal number":
		return "%s 必须是正的十进制整数", true
	case "%s must be an RFC 3339 time, like 2030-01-02T15:04:05Z":
		return "%s 必须是 RFC 3339 时间，例如 2030-01-02T15:04:05Z", true
	case "please sign in first: send Authorization: Bearer <token>":
		return "请先登录：发送 Authorization: Bearer <token>", true
	case "this is an operator route: send Authorization: Bearer <operator token>":
		return "这是运营接口：请发送 Authorization: Bearer <运营令牌>", true
	case "this is an operator route; a shopper's session cannot use it":
		return "这是运营接口，顾客的登录会话无法使用", true
	case "the operator token is wrong or revoked":
		return "运营令牌错误或已被吊销", true
	case "operator %q has a %s token: changes need a write token (seckill operators add NAME --scope write)":
		return "运营人员 %q 持有 %s 令牌：变更操作需要写权限令牌（seckill operators add NAME --scope write）", true
	case "the operators' trail is not available on this server":
		return "本服务器不提供操作记录", true
	case "limit must be a whole number from 1 to %d":
		return "limit 必须是 1 到 %d 之间的整数", true
	case "status must be one of reserved, created, paid, cancelled, failed and refunded":
		return "status 必须为 reserved、created、paid、cancelled、failed 或 refunded 之一", true
	case "cursor must be the one a Link header of this list gave":
		return "cursor 必须使用该列表 Link 响应头给出的值", true
	case "this voucher has no waiting room: buy it directly":
		return "该优惠券无需排队：请直接购买", true
	case "%s is longer than %d bytes: send the token the merchant gave, as it is":
		return "%s 超过 %d 字节：请原样发送商家提供的凭证", true
	case "card holds are not taken on this instance":
		return "本实例不进行银行卡预授权", true
	case "you did not enter this voucher's draw":
		return "你未参加该优惠券的抽签", true
	case "you have not entered this voucher's draw":
		return "你尚未参加该优惠券的抽签", true
	case "this voucher is not sold by draw, so it has no entries":
		return "该优惠券不以抽签方式销售，因此没有报名记录", true
	case "shutting down":
		return "正在关闭", true
	case "not ready: the readiness probe did not finish in time":
		return "未就绪：就绪检查未能按时完成", true
	case "not ready: %s unreachable":
		return "未就绪：无法连接 %s", true
	case "%s is required":
		return "缺少 %s", true
	case "currency must be an ISO 4217 code in capitals, such as CNY, USD or JPY":
		return "currency 必须是大写的 ISO 4217 货币代码，例如 CNY、USD 或 JPY", true
	case "shards must be 1 to %d":
		return "shards 必须为 1 到 %d", true
	case "waiting_room.admit_per_second is required":
		return "缺少 waiting_room.admit_per_second", true
	case "waiting_room.adaptive.%s is required":
		return "缺少 waiting_room.adaptive.%s", true
	case "add_stock must be 1 to %d":
		return "add_stock 必须为 1 到 %d", true
	case "admit_per_second must be 1 to %d":
		return "admit_per_second 必须为 1 到 %d", true
	case "challenge must be none, captcha or pow":
		return "challenge 必须为 none、captcha 或 pow", true
	case "captcha_required true asks for challenge captcha, not %s":
		return "captcha_required 为 true 时 challenge 应为 captcha，而不是 %s", true
	case "live order updates are not available on this server":
		return "本服务器不提供订单实时推送", true
	case "this address speaks WebSocket only: open it with new WebSocket(...)":
		return "该地址仅支持 WebSocket：请用 new WebSocket(...) 连接", true
	case "pages of this origin may not open the order feed":
		return "该来源的页面无权打开订单推送", true
	case "this server is shutting down; connect again":
		return "服务器正在关闭，请重新连接", true
	case "not a valid WebSocket handshake":
		return "不是有效的 WebSocket 握手", true
	case "this server has too many live connections; try again shortly":
		return "服务器当前连接数过多，请稍后重试", true
	case "this server has too many live connections without a sign-in; sign in, or try again shortly":
		return "服务器当前未登录的连接过多，请登录或稍后重试", true
	case "too many live connections from your address; close some of this shop's tabs, or try again shortly":
		return "你的网络地址连接数过多，请关闭部分本店页面或稍后重试", true
	case "orders are paid through the payment provider: POST /api/v1/orders/{id}/payments":
		return "订单需通过支付服务商付款：POST /api/v1/orders/{id}/payments", true
	case "the order is paid already":
		return "订单已付款", true
	case "the order is no longer waiting for payment":
		return "订单已不再等待付款", true
	case "the order was not paid through the payment provider":
		return "该订单不是通过支付服务商付款的", true
	case "the scope is %q or %q":
		return "权限范围必须为 %q 或 %q", true
	case "operator %q exists: revoke it first to give the name a new token":
		return "运营人员 %q 已存在：请先吊销，才能为该名称签发新令牌", true
	case "no operator %q has a live token":
		return "没有持有有效令牌的运营人员 %q", true
	case "only a paid order can be refunded":
		return "只有已付款的订单才能退款", true
	case "bad user id":
		return "用户 ID 无效", true
	case "state must be %q or %q":
		return "state 必须为 %q 或 %q", true
	case "send at least one of add_stock, admit_per_second, end_at and grace_seconds":
		return "请至少提交 add_stock、admit_per_second、end_at 和 grace_seconds 中的一项", true
	case "grace_seconds must be 0 to %d":
		return "grace_seconds 必须为 0 到 %d", true
	case "registering takes a solved proof of work: get one (GET /api/v1/challenges?purpose=register) and send its challenge_id and challenge_answer with the username and password":
		return "注册需要完成工作量证明：请先获取挑战（GET /api/v1/challenges?purpose=register），再将 challenge_id 和 challenge_answer 与用户名、密码一起提交", true
	case "registration takes a proof of work, and this server has no challenges":
		return "注册需要工作量证明，但本服务器未提供挑战", true
	case "the proof of work is wrong, expired or used: get a new challenge (GET /api/v1/challenges?purpose=register) and register with its answer":
		return "工作量证明错误、已过期或已被使用：请获取新的挑战（GET /api/v1/challenges?purpose=register），并用其答案注册", true
	case "purpose must be register (or absent, with voucher_id)":
		return "purpose 必须为 register（或不填，同时提供 voucher_id）", true
	case "a registration's challenge names no voucher: send purpose or voucher_id, not both":
		return "注册用的挑战不对应任何优惠券：请只提交 purpose 或 voucher_id 之一，不要同时提交", true
	case "registering takes no proof of work here (it takes %s): register without one":
		return "本服务器注册无需工作量证明（需要的是%s）：请直接注册", true
	case "end_at must be in the years %d to %d (UTC)":
		return "end_at 必须在 %d 年到 %d 年之间（UTC）", true
	case "voucher %d: its sale ended at %s; an ended sale cannot be changed":
		return "优惠券 %d 的活动已于 %s 结束；已结束的活动不能修改", true
	case "add_stock would make the stock %d, above %d":
		return "add_stock 会使库存变为 %d，超过上限 %d", true
	case "admit_per_second is for a voucher with a waiting room; this one has none":
		return "admit_per_second 仅适用于有排队室的优惠券，该优惠券没有", true
	case "admit_per_second must be within the room's adaptive bounds, %d to %d":
		return "admit_per_second 必须在排队室的自适应范围 %d 到 %d 之内", true
	case "end_at must be later than the sale's end, %s":
		return "end_at 必须晚于活动当前的结束时间 %s", true
	case "this draw is void: its entries were lost before it was made":
		return "本次抽签无效：开奖前报名记录已丢失", true
	case "entries to this draw open at %s; enter then":
		return "抽签报名将于 %s 开始，请届时参加", true
	case "entries to this draw closed at %s, when they froze":
		return "抽签报名已于 %s 截止并锁定", true
	case "this draw is not committed to its beacon round yet; enter again in a few seconds":
		return "本次抽签尚未绑定随机信标轮次，请几秒后再报名", true
	case "this draw's entries are opening; enter again in a moment":
		return "抽签报名即将开放，请稍后再试", true
	case "this voucher has not been drawn yet":
		return "该优惠券尚未开奖", true
	case "this voucher takes entries only from its merchant's list, and this account is not on it; ask the merchant":
		return "该优惠券仅接受商家名单中的用户，你的账号不在名单中；请联系商家", true
	case "this person already holds a place in this voucher's line with another account: one place per person; use that account":
		return "此人已用另一个账号在该优惠券的队列中占有位置：每人限一个位置，请使用那个账号", true
	case "the allowlist would hold more than %d entries":
		return "白名单将超过 %d 项", true
	case "this voucher takes entries only with an entry token from its merchant: get one from the merchant and send it in the Seckill-Entry-Token header":
		return "该优惠券仅接受持有商家参与凭证的用户：请向商家索取凭证，并通过 Seckill-Entry-Token 请求头发送", true
	case "the entry token is longer than %d bytes; %s":
		return "参与凭证超过 %d 字节；%s", true
	case "the entry token has expired; %s":
		return "参与凭证已过期；%s", true
	case "the entry token is not valid yet; try again at its time, or %s":
		return "参与凭证尚未生效；请到生效时间再试，或%s", true
	case "the entry token is not signed by a key this platform knows for its merchant (or is malformed); %s":
		return "参与凭证不是由本平台已知的商家密钥签发（或格式有误）；%s", true
	case "the entry token is for another voucher; %s":
		return "参与凭证属于另一张优惠券；%s", true
	case "the entry token is for another account; sign in with the account it names, or %s":
		return "参与凭证属于另一个账号；请用凭证指定的账号登录，或%s", true
	case "the entry token names no person key (1 to %d bytes); %s":
		return "参与凭证未指明个人标识（1 到 %d 字节）；%s", true
	case "the entry token lives longer than %s; %s":
		return "参与凭证有效期超过 %s；%s", true
	case "the entry token names an unknown lane %q (standard or priority); %s":
		return "参与凭证指定了未知通道 %q（应为 standard 或 priority）；%s", true
	case "%d of your holds expired unpaid or were cancelled recently; you may buy again at %s":
		return "你最近有 %d 笔订单超时未付款或被取消，可于 %s 后再次购买", true
	case "title must be valid UTF-8 text":
		return "title 必须是有效的 UTF-8 文本", true
	case "title must be 1 to %d characters":
		return "title 须为 1 到 %d 个字符", true
	case "title must not contain control characters such as tabs or line breaks":
		return "title 不能包含制表符、换行符等控制字符", true
	case "kind must be seckill, limit or common":
		return "kind 必须为 seckill、limit 或 common", true
	case "price_cents must be 0 to %d":
		return "price_cents 必须为 0 到 %d", true
	case "stock must be 1 to %d":
		return "stock 必须为 1 到 %d", true
	case "per_user_limit must be 1 to %d":
		return "per_user_limit 必须为 1 到 %d", true
	case "a voucher takes one challenge: captcha or pow, not both":
		return "一张优惠券只能使用一种验证：captcha 或 pow，不能同时使用", true
	case "shards above 1 are for seckill vouchers only":
		return "shards 大于 1 仅适用于秒杀（seckill）优惠券", true
	case "entry is for vouchers with a waiting_room: entries are checked when a shopper joins its line or draw":
		return "entry 仅适用于设置了 waiting_room 的优惠券：资格在顾客加入队列或抽签时校验", true
	case "%s must be in the years %d to %d (UTC)":
		return "%s 必须在 %d 年到 %d 年之间（UTC）", true
	case "end_at must be after begin_at":
		return "end_at 必须晚于 begin_at", true
	case "waiting_room is for seckill vouchers only":
		return "waiting_room 仅适用于秒杀（seckill）优惠券", true
	case "waiting_room.admit_per_second must be 1 to %d":
		return "waiting_room.admit_per_second 必须为 1 到 %d", true
	case "waiting_room.prequeue_seconds must be 0 to %d":
		return "waiting_room.prequeue_seconds 必须为 0 到 %d", true
	case "waiting_room.prequeue_seconds must be at least 1 in a draw: entries are taken then":
		return "抽签模式下 waiting_room.prequeue_seconds 至少为 1：报名在此期间进行", true
	case "waiting_room.mode must be line or draw":
		return "waiting_room.mode 必须为 line 或 draw", true
	case "waiting_room.draw_hold needs waiting_room.mode draw: only a draw's entries are held":
		return "waiting_room.draw_hold 需要 waiting_room.mode 为 draw：只有抽签报名才会预授权", true
	case "waiting_room.draw_pass_seconds must be 0 (the default, 600) to %d":
		return "waiting_room.draw_pass_seconds 必须为 0（默认，即 600）到 %d", true
	case "waiting_room.adaptive.target_p99_ms must be 1 to %d":
		return "waiting_room.adaptive.target_p99_ms 必须为 1 到 %d", true
	case "waiting_room.adaptive.min_per_second must be 1 to %d":
		return "waiting_room.adaptive.min_per_second 必须为 1 到 %d", true
	case "waiting_room.adaptive.max_per_second must be min_per_second to %d":
		return "waiting_room.adaptive.max_per_second 必须为 min_per_second 到 %d", true
	case "waiting_room.admit_per_second must be within waiting_room.adaptive's min_per_second and max_per_second":
		return "waiting_room.admit_per_second 必须在 waiting_room.adaptive 的 min_per_second 与 max_per_second 之间", true
	case "bad order id":
		return "订单 ID 无效", true
	case "bad voucher id":
		return "优惠券 ID 无效", true
	case "quantity must be 1 to %d":
		return "quantity 必须为 1 到 %d", true
	case "Idempotency-Key is longer than %d characters":
		return "Idempotency-Key 超过 %d 个字符", true
	case "%q is the name of SECKILL_ADMIN_TOKEN in the trail: choose another":
		return "%q 是 SECKILL_ADMIN_TOKEN 在操作记录中的名称：请换一个", true
	case "an operator's name is 1 to 64 of a-z, 0-9, '.', '_' and '-', beginning with a letter or digit":
		return "运营人员名称须为 1 到 64 个 a-z、0-9、“.”、“_”和“-”字符，并以字母或数字开头", true
	case "the waiting room is being restored after a Redis failure; try again in a few seconds, your place is kept":
		return "排队室正在从 Redis 故障中恢复，请几秒后重试，你的位置会保留", true
	case "you are not in this voucher's line; join it first":
		return "你不在该优惠券的队列中，请先加入", true
	case "the line opens at %s; join then":
		return "队列将于 %s 开放，请届时加入", true
	case "this admission pass is not valid for you and this voucher":
		return "该通行证对你或该优惠券无效", true
	case "this admission pass has expired":
		return "该通行证已过期", true
	case "this admission pass was used already":
		return "该通行证已被使用", true
	case "ask the merchant for a new entry token for this voucher and your account":
		return "请向商家索取适用于该优惠券和你账号的新参与凭证", true
	case "a different type":
		return "其他类型", true
	case "a whole number in range":
		return "范围内的整数", true
	case "a number":
		return "数字", true
	case "a string":
		return "字符串", true
	case "true or false":
		return "true 或 false", true
	case "a list":
		return "列表", true
	case "a JSON object":
		return "JSON 对象", true
	case "price_cents in %s must be a multiple of 10: card payments round its third decimal to zero":
		return "%s 的 price_cents 必须是 10 的倍数：银行卡支付会将第三位小数取整为零", true
	case "price_cents in MGA must be a multiple of 100: card payments take whole ariary":
		return "MGA 的 price_cents 必须是 100 的倍数：银行卡支付只接受整数阿里亚里", true
	case "Web Push reminders are not offered here":
		return "此处不提供 Web Push 提醒", true
	case "the query needs the subscription's endpoint":
		return "查询参数须包含订阅的 endpoint", true
	case "must be the push service's https URL, at most %d characters":
		return "必须是推送服务的 https 地址，最多 %d 个字符", true
	case "must be the base64url of an uncompressed P-256 public key (65 bytes)":
		return "必须是未压缩 P-256 公钥（65 字节）的 base64url 编码", true
	case "must be the base64url of the 16-byte authentication secret":
		return "必须是 16 字节认证密钥的 base64url 编码", true
	case "must be an e-mail address such as name@example.com, at most %d characters":
		return "必须是形如 name@example.com 的邮箱地址，最多 %d 个字符", true
	}
	return "", false
}
