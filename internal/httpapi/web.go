package httpapi

import (
	"embed"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"strings"
)

// webFS holds the dashboard: web/index.html (the page), web/login.html (the login form, when
// there is one) and the assets the page loads from /static/.
//
//go:embed web
var webFS embed.FS

// web is webFS rooted at web/.
var web, _ = fs.Sub(webFS, "web")

// defaultLoginPage is the login form when web/ has no login.html.
const defaultLoginPage = `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>didnmf: log in</title></head>
<body>
<h1>didnmf</h1>
<p>This node's dashboard needs a token.</p>
<form method="get" action="/login">
<label for="token">Token</label> <input id="token" name="token" type="password" required autofocus>
<button type="submit">Log in</button>
</form>
<p>Open the URL that <code>didnmf serve --http</code> printed, or print it again with <code>didnmf dashboard</code>.</p>
</body>
</html>
`

// loginPage answers the login form with status (401 after a token that is not valid).
func (s *Server) loginPage(w http.ResponseWriter, status int) {
	page, err := fs.ReadFile(web, "login.html")
	if err != nil {
		page = []byte(defaultLoginPage)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(page)
}

// index serves the dashboard's page (to an authenticated browser; guard answers the login
// form to one without credentials).
func (s *Server) index(w http.ResponseWriter, r *http.Request, _ identity) error {
	page, err := fs.ReadFile(web, "index.html")
	if err != nil {
		return errorf(http.StatusNotFound, "not_found", "this build has no dashboard page")
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(page)
	return nil
}

// static serves an embedded asset under /static/.
func (s *Server) static(w http.ResponseWriter, r *http.Request, _ identity) error {
	name := strings.TrimPrefix(r.URL.Path, "/static/")
	if name == "" || name == "index.html" || name == "login.html" || !fs.ValidPath(name) {
		return errorf(http.StatusNotFound, "not_found", "no asset %q", name)
	}
	f, err := web.Open(name)
	if err != nil {
		return errorf(http.StatusNotFound, "not_found", "no asset %q", name)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.IsDir() {
		return errorf(http.StatusNotFound, "not_found", "no asset %q", name)
	}
	rs, ok := f.(io.ReadSeeker)
	if !ok {
		return errors.New("embedded asset cannot seek")
	}
	w.Header().Set("Cache-Control", "no-cache")
	http.ServeContent(w, r, name, st.ModTime(), rs)
	return nil
}

// login logs a browser in: GET /login?token=T makes a session for T's identity, sets its
// cookie and answers 303 to / (so that the token leaves the address bar); a bad token is
// counted against the address and answers the login form with 401.
func (s *Server) login(w http.ResponseWriter, r *http.Request, _ identity) error {
	ip := remoteIP(r)
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "none" && site != "same-origin" {
		return errorf(http.StatusForbidden, "forbidden", "login from another site (Sec-Fetch-Site %s) refused: open the login link yourself", clip(site, 32))
	}
	tok := r.URL.Query().Get("token")
	if tok == "" {
		s.loginPage(w, http.StatusOK)
		return nil
	}
	id, ok := s.tokenIdentity(tok)
	if !ok {
		if s.fails.limited(ip) {
			return errorf(http.StatusTooManyRequests, "limit", "too many failed authentications from %s: wait a minute", ip)
		}
		s.failedAuth(ip)
		s.loginPage(w, http.StatusUnauthorized)
		return nil
	}
	http.SetCookie(w, &http.Cookie{Name: s.cookieName(), Value: s.sessions.add(id), Path: "/", HttpOnly: true,
		Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode, MaxAge: int(s.cfg.SessionTTL.Seconds())})
	http.Redirect(w, r, "/", http.StatusSeeOther)
	return nil
}

// logout ends the session of the request's cookie and clears it (a cross-origin request is
// refused, so that another site cannot log the operator out).
func (s *Server) logout(w http.ResponseWriter, r *http.Request, _ identity) error {
	if err := s.csrf.Check(r); err != nil {
		return errorf(http.StatusForbidden, "forbidden", "cross-origin request refused")
	}
	if c, err := r.Cookie(s.cookieName()); err == nil {
		s.sessions.remove(c.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: s.cookieName(), Value: "", Path: "/", HttpOnly: true, Secure: r.TLS != nil,
		SameSite: http.SameSiteStrictMode, MaxAge: -1})
	w.WriteHeader(http.StatusNoContent)
	return nil
}
