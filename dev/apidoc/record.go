package apidoc

import (
	"net/http"
	"net/http/httptest"

	"github.com/fleetops/fleet/shared/web"
)

// Reporter is where Recorder and Probe report mismatches; testing.TB is
// one.
type Reporter interface {
	Errorf(format string, args ...any)
}

// Recorder serves h and checks every answer with CheckAny before passing
// it on unchanged: answers of described operations must match the
// document, and requests it does not describe must get the JSON 404 of an
// unknown route. Each mismatch is reported to t, naming the request. An
// answer to a client that went away (web's 499) reaches no one and is not
// checked.
func (d *Doc) Recorder(t Reporter, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
		if r.Context().Err() != nil && rec.Code == web.StatusClientClosedRequest {
			return
		}
		if err := d.CheckAny(r, rec.Code, rec.Header(), rec.Body.Bytes()); err != nil {
			t.Errorf("%s %s: answer does not match %s: %v", r.Method, r.URL.RequestURI(), File, err)
		}
	})
}
