package httpapi

import (
	"net/http"

	"github.com/wdc-dev/wdc/protocol"
)

// Following a running attempt's logs (docs/protocol.md, "Following
// logs"): the worker's chunks and the operator's long poll.

func (s *server) serveLogChunk(w http.ResponseWriter, r *http.Request) {
	var token int64
	sess, req, _, ok := sessionRequest(s, w, r, func(req protocol.LogChunkRequest) error {
		var err error
		if token, err = pathToken(r.PathValue("token")); err != nil {
			return err
		}
		return checkLogChunk(req)
	}, func(req protocol.LogChunkRequest) string { return req.WorkerID })
	if !ok {
		return
	}
	resp, err := s.c.LogChunk(sess, token, req)
	respond(w, resp, err)
}

func (s *server) serveFollowLog(w http.ResponseWriter, r *http.Request) {
	_, req, _, ok := decodeRequest(s, w, r, checkFollow, operators...)
	if !ok {
		return
	}
	resp, err := s.c.FollowLog(r.Context(), req)
	if err != nil && r.Context().Err() != nil {
		return
	}
	respond(w, resp, err)
}
