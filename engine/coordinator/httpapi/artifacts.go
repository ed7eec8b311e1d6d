package httpapi

import (
	"io"
	"net/http"
	"strconv"

	"github.com/wdc-dev/wdc/artifact"
)

// serveArtifact is PUT /v1/artifacts/{sha256}, a worker uploading a blob
// one of its results is waiting for (coordinator.PutArtifact), and GET, a
// worker fetching an input (coordinator.OpenInput), streamed both ways.
func (s *server) serveArtifact(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPut && r.Method != http.MethodGet {
		notAllowed(w, "GET, PUT", "method %s is not allowed; use PUT to upload, GET to download", r.Method).write(w)
		return
	}
	cred, herr := s.authenticate(r, sessions...)
	if herr != nil {
		herr.write(w)
		return
	}
	sess, err := s.c.Session(cred, "")
	if err != nil {
		answerOf(err).write(w)
		return
	}
	hash, err := artifact.ParseHash(r.PathValue("sha256"))
	if err != nil {
		badRequest("%v", err).write(w)
		return
	}
	if r.Method == http.MethodGet {
		f, size, err := s.c.OpenInput(sess, hash)
		if err != nil {
			answerOf(err).write(w)
			return
		}
		defer f.Close()
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
		w.WriteHeader(http.StatusOK)
		_, _ = io.Copy(w, f)
		return
	}
	resp, err := s.c.PutArtifact(r.Context(), sess, hash, r.ContentLength, r.Body)
	switch {
	case err != nil && r.Context().Err() != nil:
		return // the client went away
	case err != nil:
		answerOf(err).write(w)
		return
	}
	status := http.StatusOK
	if resp.Created {
		status = http.StatusCreated
	}
	writeJSON(w, status, resp)
}
