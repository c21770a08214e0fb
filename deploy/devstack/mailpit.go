package devstack

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"syscall"
)

// MailpitModule is the mail catcher at the version the Makefile installs
// into bin/ (make test-deps, and make run with SECKILL_DEV_MAIL=mailpit).
const MailpitModule = "github.com/axllent/mailpit@v1.33.1"

// MailpitOptions configures StartMailpit.
type MailpitOptions struct {
	// Dir holds mailpit.log and the message database; created if missing.
	Dir string
	// Log receives progress messages; nil discards them.
	Log *slog.Logger
}

// Mailpit is a private mailpit child process on 127.0.0.1: a real SMTP
// server that keeps every message it is given and shows them on its HTTP
// API (GET /api/v1/messages) and web page.
type Mailpit struct {
	// SMTPURL is smtp://127.0.0.1:<port> (any user and password, or none,
	// is accepted).
	SMTPURL string
	// APIURL is http://127.0.0.1:<port>, its web page and API.
	APIURL  string
	LogPath string

	srv *server
}

// StartMailpit runs mailpit on two free ports and returns once its API
// answers. The binary is found or installed as stripe-mock is
// (goToolBinary).
func StartMailpit(ctx context.Context, opts MailpitOptions) (*Mailpit, error) {
	dir, err := serviceDir(opts.Dir, "mailpit")
	if err != nil {
		return nil, err
	}
	bin, err := goToolBinary(ctx, "mailpit", MailpitModule)
	if err != nil {
		return nil, err
	}
	log := logger(opts.Log)
	return onFreePorts(func() (*Mailpit, error) {
		smtpPort, err := freePort()
		if err != nil {
			return nil, err
		}
		httpPort, err := freePort()
		if err != nil {
			return nil, err
		}
		smtpAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(smtpPort))
		httpAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(httpPort))
		m := &Mailpit{SMTPURL: "smtp://" + smtpAddr, APIURL: "http://" + httpAddr, LogPath: filepath.Join(dir, "mailpit.log")}
		m.srv = &server{
			log: log,
			spec: procSpec{
				name: "mailpit", bin: bin,
				// No version check (no internet here), the database in
				// the private folder, AUTH of any credentials over plain
				// loopback SMTP, as a relay's clients would send them.
				args: []string{"--smtp", smtpAddr, "--listen", httpAddr, "--database", filepath.Join(dir, "mailpit.db"),
					"--smtp-auth-accept-any", "--smtp-auth-allow-insecure", "--disable-version-check", "--smtp-disable-rdns"},
				dir:     dir,
				logPath: m.LogPath, deathSig: syscall.SIGTERM,
			},
			stopSig: syscall.SIGTERM,
			ready:   func(ctx context.Context, _ *process) error { return mailpitReady(ctx, m.APIURL, smtpAddr) },
		}
		if err := m.srv.start(ctx); err != nil {
			return nil, err
		}
		log.Info("devstack: mailpit ready", "smtp", m.SMTPURL, "ui", m.APIURL, "pid", m.srv.pid())
		return m, nil
	}, nil)
}

// Stop ends mailpit; it is safe to call more than once.
func (m *Mailpit) Stop(ctx context.Context) error { return m.srv.stop(ctx) }

// mailpitReady asks the API for its messages and dials the SMTP port.
func mailpitReady(ctx context.Context, api, smtpAddr string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, api+"/api/v1/messages", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("mailpit answered %s", resp.Status)
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", smtpAddr)
	if err != nil {
		return err
	}
	return c.Close()
}

// MailMessage is one message as mailpit's API shows it.
type MailMessage struct {
	ID      string
	Subject string
	To      []struct{ Address string }
	Text    string
}

// MessageTo is the newest message mailpit got for addr, with its text; ok
// is false while there is none. Tests read what a shopper was sent by it.
func (m *Mailpit) MessageTo(ctx context.Context, addr string) (msg MailMessage, ok bool, err error) {
	var list struct{ Messages []MailMessage }
	if err := m.getJSON(ctx, "/api/v1/messages?limit=500", &list); err != nil {
		return MailMessage{}, false, err
	}
	for _, l := range list.Messages {
		for _, to := range l.To {
			if to.Address == addr {
				err := m.getJSON(ctx, "/api/v1/message/"+l.ID, &msg)
				return msg, err == nil, err
			}
		}
	}
	return MailMessage{}, false, nil
}

// getJSON decodes the answer of mailpit's API at path into v.
func (m *Mailpit) getJSON(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.APIURL+path, nil)
	if err != nil {
		return fmt.Errorf("mailpit: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("mailpit: GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("mailpit: GET %s answered %s", path, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("mailpit: GET %s: %w", path, err)
	}
	return nil
}
