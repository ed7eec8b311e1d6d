package httpapi

import "net/http"

// serveMetrics answers GET /metrics in the Prometheus text format: open on
// loopback (coordinator.Options.MetricsOpen), else for the operator
// credential only.
func (s *server) serveMetrics(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		notAllowed(w, "GET, HEAD", "method %s is not allowed; use GET", r.Method).write(w)
		return
	}
	if !s.c.MetricsOpen() {
		if _, herr := s.authenticate(r, operators...); herr != nil {
			herr.write(w)
			return
		}
	}
	s.metrics.ServeHTTP(w, r)
}
