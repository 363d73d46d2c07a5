// Package dashboard serves ffrun's web console under /ui/: pages for runs
// (with their graph, members, result and failures), executions,
// templates, schedules and workers, and the operator's actions on them
// (cancel and replay a run, start a run of a template).
//
// The pages are rendered on the server (html/template, no script) and
// read and act through ffrun's own /v1 API, called in process: the
// console can do nothing the API does not allow, every action is checked
// and refused as the API would, and the API's metrics and logs see it.
// When ffrun has an API token, the console asks for it once and keeps a
// session cookie signed with it (changing the token ends every session);
// unsafe requests from other origins are refused
// (http.CrossOriginProtection).
package dashboard

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/flowfabric/ff/runtime/api"
	"github.com/flowfabric/ff/runtime/authlimit"
	"github.com/flowfabric/ff/runtime/client"
)

// Prefix is the path the console is served under.
const Prefix = "/ui"

// SessionTTL is how long a console login lasts.
const SessionTTL = 12 * time.Hour

// RefreshDefault is how often a page showing running work reloads itself.
const RefreshDefault = 2 * time.Second

// A page that reads many members per load (a run's page of members and
// its failures) reloads once per Refresh for each RefreshMembers of them,
// at most every RefreshSlowest: a page of 1,000 members every 4 s, not
// every 2 s per open tab.
const (
	RefreshMembers = 500
	RefreshSlowest = 30 * time.Second
)

//go:embed templates/*.html static/*
var files embed.FS

// Config configures the console.
type Config struct {
	// API is the /v1 API the pages call, in process; required.
	API http.Handler
	// Token is the API's bearer token; "" = the API is open, and so is
	// the console (no login).
	Token string
	// Refresh is how often pages showing running work reload; 0 =
	// RefreshDefault, negative = never.
	Refresh time.Duration
	Logger  *slog.Logger
	// Now is the clock of sessions (tests); nil = time.Now.
	Now func() time.Time
	// Revoked keeps the sessions signed out of before their expiry, for
	// every ffrun sharing the token; nil = a sign-out only drops the
	// browser's cookie.
	Revoked Revocations
	// AuthLimiter, when set, paces the sign-ins of an address that failed
	// too often, and refuses them past its wait (the API's limiter: they
	// count together); nil = sign-ins are judged at once.
	AuthLimiter *authlimit.Limiter
}

// Revocations records sessions ended early. ffrun keeps them in Valkey.
type Revocations interface {
	RevokeSession(ctx context.Context, id string, expiry time.Time) error
	SessionRevoked(ctx context.Context, id string) (bool, error)
}

// Dashboard is the console. It is an http.Handler for the paths under
// Prefix.
type Dashboard struct {
	cfg   Config
	log   *slog.Logger
	pages map[string]*template.Template
	mux   *http.ServeMux
	h     http.Handler
	key   []byte          // signs sessions; derived from the token
	token authlimit.Token // the token, to compare sign-ins with
}

// New builds the console.
func New(cfg Config) (*Dashboard, error) {
	if cfg.API == nil {
		return nil, errors.New("dashboard: Config.API is required")
	}
	if cfg.Refresh == 0 {
		cfg.Refresh = RefreshDefault
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	d := &Dashboard{cfg: cfg, log: cfg.Logger, mux: http.NewServeMux()}
	if cfg.Token != "" {
		m := hmac.New(sha256.New, []byte(cfg.Token))
		m.Write([]byte("ffrun console session key"))
		d.key = m.Sum(nil)
		d.token = authlimit.NewToken(cfg.Token)
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	d.pages = pages
	d.routes()
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.render(w, r, http.StatusForbidden, &view{page: "error", title: "Refused",
			data: "This request came from another site, so the console refused it: open the console itself and act from its pages."})
	}))
	d.h = cop.Handler(d.mux)
	return d, nil
}

func (d *Dashboard) routes() {
	m := d.mux
	m.HandleFunc("GET "+Prefix+"/{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, Prefix+"/runs", http.StatusSeeOther)
	})
	static, err := fs.Sub(files, "static")
	if err != nil {
		panic(err) // the directory is embedded
	}
	m.Handle("GET "+Prefix+"/static/", http.StripPrefix(Prefix+"/static", http.FileServerFS(static)))
	m.HandleFunc("GET "+Prefix+"/login", d.loginPage)
	m.HandleFunc("POST "+Prefix+"/login", d.login)
	m.HandleFunc("POST "+Prefix+"/logout", d.logout)
	m.Handle("GET "+Prefix+"/runs", d.page(d.runs))
	m.Handle("GET "+Prefix+"/runs/{id}", d.page(d.run))
	m.Handle("GET "+Prefix+"/runs/{id}/cancel", d.page(d.confirmCancel))
	m.Handle("POST "+Prefix+"/runs/{id}/cancel", d.page(d.cancelRun))
	m.Handle("POST "+Prefix+"/runs/{id}/replay", d.page(d.replayRun))
	m.Handle("GET "+Prefix+"/bulk", d.page(d.confirmBulk))
	m.Handle("POST "+Prefix+"/bulk", d.page(d.bulkAct))
	m.Handle("GET "+Prefix+"/executions/{id}", d.page(d.execution))
	m.Handle("GET "+Prefix+"/templates", d.page(d.templates))
	m.Handle("GET "+Prefix+"/templates/{name}", d.page(d.template))
	m.Handle("POST "+Prefix+"/templates/{name}/runs", d.page(d.startRun))
	m.Handle("GET "+Prefix+"/schedules", d.page(d.schedules))
	m.Handle("GET "+Prefix+"/schedules/{name}/delete", d.page(d.confirmDelete))
	m.Handle("POST "+Prefix+"/schedules/{name}/delete", d.page(d.deleteSchedule))
	m.Handle("POST "+Prefix+"/schedules/{name}/run", d.page(d.runSchedule))
	m.Handle("GET "+Prefix+"/workers", d.page(d.workers))
	m.Handle("GET "+Prefix+"/limits", d.page(d.limits))
	m.Handle("GET "+Prefix+"/budgets/reset", d.page(d.confirmReset))
	m.Handle("POST "+Prefix+"/budgets/reset", d.page(d.resetBudget))
	m.Handle("POST "+Prefix+"/quotas/pause", d.page(d.pauseQuota))
	m.Handle("POST "+Prefix+"/quotas/resume", d.page(d.resumeQuota))
	m.Handle("GET "+Prefix+"/", d.page(func(q *request) (*view, error) {
		// "/ui/runs/" is "/ui/runs".
		if p := strings.TrimRight(q.r.URL.Path, "/"); p != q.r.URL.Path && p != Prefix && !strings.Contains(p, "//") {
			u := *q.r.URL
			u.Path, u.RawPath = p, ""
			return &view{redirect: u.RequestURI()}, nil
		}
		return nil, &pageError{status: http.StatusNotFound, msg: "There is no such page."}
	}))
}

// ServeHTTP serves one request of the console.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Frame-Options", "DENY")
	if r.URL.Path == Prefix {
		http.Redirect(w, r, Prefix+"/runs", http.StatusSeeOther)
		return
	}
	d.h.ServeHTTP(w, r)
}

// request is what a page handler gets: the request and a client of the
// API acting for it.
type request struct {
	r   *http.Request
	api *client.Client
}

func (q *request) ctx() context.Context { return q.r.Context() }

// view is a rendered page's name and data; redirect instead sends the
// browser elsewhere (after an action).
type view struct {
	page     string
	title    string
	data     any
	refresh  bool // the page shows running work: reload it
	members  int  // the members a load reads (a run's): large pages reload less often
	status   int  // 0 = 200
	redirect string
	auth     authState
}

// authState is what render knows of the reader's session.
type authState int

const (
	authUnknown authState = iota // render checks
	authOpen
	authClosed
)

// pageError is an answer other than 200 with a message for the user.
type pageError struct {
	status int
	msg    string
}

func (e *pageError) Error() string { return e.msg }

// page wraps a page handler: the session check, the API client, the
// rendering of its view or error.
func (d *Dashboard) page(fn func(*request) (*view, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ok, err := d.authenticated(r)
		if err != nil {
			d.log.WarnContext(r.Context(), "console: session check failed", slog.Any("err", err))
			d.render(w, r, http.StatusServiceUnavailable, &view{page: "error", title: "Unavailable", auth: authClosed,
				data: "The session cannot be checked: ffrun does not reach its Valkey. Try again in a moment."})
			return
		}
		if !ok {
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				d.render(w, r, http.StatusUnauthorized, &view{page: "signedout", title: "Signed out", data: loginData{Next: safeNext(sameOriginReferer(r))}})
				return
			}
			http.Redirect(w, r, Prefix+"/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		// A browser percent-encodes what JSON is full of (quotes, braces,
		// new lines): up to three bytes a byte.
		if r.Method == http.MethodPost && !d.readForm(w, r, 3*InputMax+64<<10, "a run's input may be at most 1 MiB") {
			return
		}
		api, err := client.New("http://ffrun.console", client.WithToken(d.cfg.Token),
			client.WithHTTPClient(&http.Client{Transport: client.HandlerTransport(d.cfg.API)}))
		if err != nil {
			d.fail(w, r, err)
			return
		}
		v, err := fn(&request{r: r, api: api})
		if err != nil {
			d.fail(w, r, err)
			return
		}
		if v.redirect != "" {
			http.Redirect(w, r, v.redirect, http.StatusSeeOther)
			return
		}
		status := http.StatusOK
		if v.status != 0 {
			status = v.status
		}
		v.auth = authOpen
		d.render(w, r, status, v)
	})
}

// fail renders err: the API's refusals with their status and message,
// anything else as a 500 that is logged.
func (d *Dashboard) fail(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		// The browser went away: nobody reads an answer.
		d.log.DebugContext(r.Context(), "console page abandoned", slog.String("path", r.URL.Path), slog.Any("err", err))
		return
	}
	var pe *pageError
	var ae *client.APIError
	switch {
	case errors.As(err, &pe):
		d.render(w, r, pe.status, &view{page: "error", title: http.StatusText(pe.status), data: pe.msg})
	case errors.As(err, &ae):
		d.render(w, r, ae.Status, &view{page: "error", title: http.StatusText(ae.Status),
			data: fmt.Sprintf("%s (%s)", ae.Message, ae.Code)})
	default:
		d.log.ErrorContext(r.Context(), "console page failed", slog.String("path", r.URL.Path), slog.Any("err", err))
		d.render(w, r, http.StatusInternalServerError, &view{page: "error", title: "Internal error",
			data: "The page could not be made; the server's log says why."})
	}
}

// layout is what the layout template gets.
type layout struct {
	Title    string
	Nav      string // the section of the page, for the navigation bar
	Refresh  int    // seconds; 0 = no reload
	Again    string // the URL a reload loads: this one without its notice
	Stop     string // this URL with refresh=off
	SignedIn bool   // a session exists (a token is set)
	Open     bool   // the pages are open to the reader: no token, or signed in
	Data     any
}

func (d *Dashboard) render(w http.ResponseWriter, r *http.Request, status int, v *view) {
	t, ok := d.pages[v.page]
	if !ok {
		d.log.ErrorContext(r.Context(), "console: no such page template", slog.String("page", v.page))
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	open := v.auth == authOpen || v.auth == authUnknown && d.open(r)
	l := layout{Title: v.title, Nav: section(r.URL.Path), Data: v.data, SignedIn: d.cfg.Token != "" && open, Open: open}
	if v.refresh && d.cfg.Refresh > 0 && r.URL.Query().Get("refresh") != "off" {
		every := d.cfg.Refresh
		if n := (v.members + RefreshMembers - 1) / RefreshMembers; n > 1 {
			every = max(d.cfg.Refresh, min(every*time.Duration(n), RefreshSlowest))
		}
		l.Refresh = max(1, int(every.Round(time.Second)/time.Second))
		u := *r.URL
		q := u.Query()
		q.Del("done")
		u.RawQuery = q.Encode()
		l.Again = u.RequestURI()
		q.Set("refresh", "off")
		u.RawQuery = q.Encode()
		l.Stop = u.RequestURI()
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", l); err != nil {
		d.log.ErrorContext(r.Context(), "console: render", slog.String("page", v.page), slog.Any("err", err))
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// section is the navigation entry a path belongs to.
func section(path string) string {
	rest := strings.TrimPrefix(path, Prefix+"/")
	first, _, _ := strings.Cut(rest, "/")
	switch first {
	case "executions", "bulk":
		return "runs"
	case "budgets", "quotas":
		return "limits"
	case "runs", "templates", "schedules", "workers", "limits":
		return first
	}
	return ""
}

// Sessions: SameSite=Lax, so that a link to a run pasted in a chat opens
// it (a Strict cookie is not sent on that first navigation); what Strict
// would add, unsafe requests from other sites, CrossOriginProtection
// refuses anyway. The cookie holds its expiry, a random nonce and an HMAC of
// both keyed by the token, so that every ffrun sharing the token accepts
// it and a new token ends the old sessions; a sign-out records the
// session as revoked (Config.Revoked) until its expiry.

const sessionCookie = "ff_session"

// session returns the valid session of r: its id (the HMAC as the cookie
// was issued with it, its only accepted spelling, which names it in
// Config.Revoked) and expiry.
func (d *Dashboard) session(r *http.Request) (id string, exp time.Time, ok bool) {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return "", time.Time{}, false
	}
	parts := strings.Split(c.Value, ".")
	if len(parts) != 3 {
		return "", time.Time{}, false
	}
	// One spelling only: a lenient decoder would take others of the same
	// signature (the unused bits of the last character, line breaks), each
	// naming a session that no sign-out revoked.
	got, err := base64.RawURLEncoding.Strict().DecodeString(parts[2])
	if err != nil || base64.RawURLEncoding.EncodeToString(got) != parts[2] || !hmac.Equal(got, d.sign(parts[0]+"."+parts[1])) {
		return "", time.Time{}, false
	}
	unix, err := strconv.ParseInt(parts[0], 10, 64)
	if err != nil || d.cfg.Now().Unix() >= unix {
		return "", time.Time{}, false
	}
	return parts[2], time.Unix(unix, 0), true
}

// authenticated says whether r may see the pages. An error is a check
// that could not be made (Valkey unreachable): the session is not taken
// as valid, and the reader is told why rather than asked to sign in.
func (d *Dashboard) authenticated(r *http.Request) (bool, error) {
	if d.cfg.Token == "" {
		return true, nil
	}
	id, _, ok := d.session(r)
	if !ok {
		return false, nil
	}
	if d.cfg.Revoked != nil {
		revoked, err := d.cfg.Revoked.SessionRevoked(r.Context(), id)
		if err != nil {
			return false, err
		}
		return !revoked, nil
	}
	return true, nil
}

// open is authenticated without its error (pages that only choose what
// to show).
func (d *Dashboard) open(r *http.Request) bool {
	ok, _ := d.authenticated(r)
	return ok
}

func (d *Dashboard) sign(payload string) []byte {
	m := hmac.New(sha256.New, d.key)
	m.Write([]byte(payload))
	return m.Sum(nil)
}

func (d *Dashboard) loginPage(w http.ResponseWriter, r *http.Request) {
	if d.cfg.Token == "" || d.open(r) {
		http.Redirect(w, r, safeNext(r.URL.Query().Get("next")), http.StatusSeeOther)
		return
	}
	d.render(w, r, http.StatusOK, &view{page: "login", title: "Sign in", data: loginData{Next: safeNext(r.URL.Query().Get("next"))}})
}

// readForm reads the form of POST r, at most limit bytes; a form that
// does not decode (a 400) or is too large (a 413: why says what is
// allowed) is answered here, and readForm returns false. A sign-in with a
// form that does not read is no wrong token: nothing is counted.
func (d *Dashboard) readForm(w http.ResponseWriter, r *http.Request, limit int64, why string) bool {
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	err := r.ParseForm()
	if err == nil {
		return true
	}
	status, msg := http.StatusBadRequest, "The form could not be read: "+err.Error()
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		status, msg = http.StatusRequestEntityTooLarge, "The form is too large ("+why+")."
	}
	d.render(w, r, status, &view{page: "error", title: http.StatusText(status), data: msg})
	return false
}

type loginData struct {
	Next  string
	Error string
}

func (d *Dashboard) login(w http.ResponseWriter, r *http.Request) {
	if d.cfg.Token == "" {
		http.Redirect(w, r, Prefix+"/runs", http.StatusSeeOther)
		return
	}
	if !d.readForm(w, r, 64<<10, "a sign-in form holds a token") {
		return
	}
	next := safeNext(r.FormValue("next"))
	// Judged at the pace of the API's limiter, right or wrong (see
	// authlimit): while the address is limited, the sign-in waits its turn
	// or is refused without the token being compared.
	v, retry, err := d.cfg.AuthLimiter.Check(r.Context(), authlimit.Addr(r), d.token, strings.TrimSpace(r.FormValue("token")))
	switch {
	case err != nil:
		d.log.DebugContext(r.Context(), "console sign-in abandoned", slog.Any("err", err))
		return
	case v == authlimit.Refused:
		ae := api.AuthRefused(w.Header(), retry)
		d.render(w, r, http.StatusTooManyRequests, &view{page: "login", title: "Sign in",
			data: loginData{Next: next, Error: "Too many wrong tokens from this address: " + strings.TrimPrefix(ae.Message, "too many failed authentications from this address: ") + "."}})
		return
	case v != authlimit.Admitted:
		d.log.WarnContext(r.Context(), "console sign-in refused", slog.String("remote", r.RemoteAddr))
		d.render(w, r, http.StatusUnauthorized, &view{page: "login", title: "Sign in",
			data: loginData{Next: next, Error: "That is not ffrun's API token (FF_API_TOKEN)."}})
		return
	}
	payload := strconv.FormatInt(d.cfg.Now().Add(SessionTTL).Unix(), 10) + "." + nonce()
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: payload + "." + base64.RawURLEncoding.EncodeToString(d.sign(payload)),
		Path: Prefix, MaxAge: int(SessionTTL / time.Second), HttpOnly: true, SameSite: http.SameSiteLaxMode,
		Secure: secure(r),
	})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (d *Dashboard) logout(w http.ResponseWriter, r *http.Request) {
	if id, exp, ok := d.session(r); ok && d.cfg.Revoked != nil {
		if err := d.cfg.Revoked.RevokeSession(r.Context(), id, exp); err != nil {
			d.fail(w, r, fmt.Errorf("sign out: %w", err))
			return
		}
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: Prefix, MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: secure(r)})
	target := Prefix + "/runs"
	if d.cfg.Token != "" {
		target = Prefix + "/login"
	}
	http.Redirect(w, r, target, http.StatusSeeOther)
}

// sameOriginReferer is the path of the page a form was sent from, when
// the browser says and it is this host's.
func sameOriginReferer(r *http.Request) string {
	u, err := url.Parse(r.Referer())
	if err != nil || u.Host != r.Host {
		return ""
	}
	return u.RequestURI()
}

// secure says the browser reached ffrun over HTTPS, directly or through a
// proxy that says so.
func secure(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

// safeNext keeps a redirect after sign-in inside the console: a path
// under Prefix, never another host ("//evil", "/\evil").
func safeNext(next string) string {
	if !strings.HasPrefix(next, Prefix+"/") || strings.ContainsAny(next, "\\\r\n") || strings.HasPrefix(next, "//") {
		return Prefix + "/runs"
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.Opaque != "" {
		return Prefix + "/runs"
	}
	// Dot segments ("/ui/../v1") are resolved as the browser would.
	if clean := path.Clean(u.Path); clean != u.Path && clean+"/" != u.Path || !strings.HasPrefix(clean+"/", Prefix+"/") || clean == Prefix {
		return Prefix + "/runs"
	}
	return next
}
