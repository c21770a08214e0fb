package remind

import (
	"fmt"
	"time"
)

// The languages of the reminders, as the gateway negotiates them from the
// saving request's Accept-Language; an unknown one falls back to English.
const (
	LangEnglish = "en"
	LangChinese = "zh-CN"
)

// text is one reminder's words in one language: fmt formats of the sale's
// title (subject, title) and of the title, the deadline and the page's
// address (body).
type text struct {
	subject, title, body, action string
}

// textOf is every reminder's words, by language: the one table to edit.
// An unknown language gets English.
func textOf(lang string) text {
	switch lang {
	case LangChinese:
		return text{
			subject: "轮到您购买了：%s",
			title:   "轮到您了：%s",
			body:    "您在「%s」的购买机会到了。请在 %s 之前打开页面完成购买，逾期机会将让给下一位顾客。",
			action:  "打开活动页面：%s",
		}
	default:
		return text{
			subject: "Your turn to buy: %s",
			title:   "Your turn: %s",
			body:    "Your turn to buy in the sale %q has come. Open the page and buy before %s: after that your turn goes to the next shopper.",
			action:  "Open the sale: %s",
		}
	}
}

// Message is one reminder's words.
type Message struct {
	Subject, Title, Body string
	// URL is the page to open.
	URL string
	// Until is the deadline the words name: the last moment the shopper
	// may come back and buy.
	Until time.Time
}

// message words the reminder of a turn open until until for the sale
// titled sale, in lang. Times are shown in UTC, the only zone the server
// knows the shopper by.
func message(lang, sale, pageURL string, until time.Time) Message {
	tx := textOf(lang)
	return Message{
		Subject: fmt.Sprintf(tx.subject, sale),
		Title:   fmt.Sprintf(tx.title, sale),
		Body:    fmt.Sprintf(tx.body, sale, until.UTC().Format("2006-01-02 15:04:05 UTC")),
		URL:     pageURL,
		Until:   until,
	}
}

// mailBody is the plain text of the e-mail of m.
func mailBody(lang string, m Message) string {
	tx := textOf(lang)
	return m.Body + "\r\n\r\n" + fmt.Sprintf(tx.action, m.URL) + "\r\n"
}
