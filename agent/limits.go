package agent

import (
	"fmt"
	"io"
	"os"

	"github.com/wdc-dev/wdc/artifact"
	"github.com/wdc-dev/wdc/internal/regularfile"
	"github.com/wdc-dev/wdc/protocol"
)

// fitArtifacts keeps a result's artifacts within the coordinator's
// max_artifact_size (maxSize bytes; 0 means unknown, nothing is changed):
// a log over it is replaced by its last bytes, under a first line saying
// how much was cut (written next to the log, as <log>.tail); an output
// over it is left out and fails the attempt (class failure) with a reason
// naming the output, its size and the setting. files maps each hash to
// its file and is updated to match.
func fitArtifacts(req *protocol.ResultRequest, files map[string]string, maxSize int64) {
	if maxSize <= 0 {
		return
	}
	kept := req.Artifacts[:0]
	for _, ref := range req.Artifacts {
		if ref.Size <= maxSize {
			kept = append(kept, ref)
			continue
		}
		switch ref.Kind {
		case protocol.ArtifactLog:
			tail, err := writeTail(files[ref.SHA256], ref.Size, maxSize)
			if err != nil {
				fail(req, fmt.Sprintf("the %s log is %s, more than the coordinator's max_artifact_size (%s), and cutting it failed: %v",
					ref.Name, artifact.FormatSize(ref.Size), artifact.FormatSize(maxSize), err))
				continue
			}
			h, size, err := artifact.HashFile(tail)
			if err != nil {
				fail(req, fmt.Sprintf("the %s log: %v", ref.Name, err))
				continue
			}
			ref.SHA256, ref.Size = h, size
			files[h] = tail
			kept = append(kept, ref)
		default:
			fail(req, fmt.Sprintf("output %s is %s, more than the coordinator's max_artifact_size (%s): raise max_artifact_size in the wdc block, or make the output smaller",
				ref.Name, artifact.FormatSize(ref.Size), artifact.FormatSize(maxSize)))
		}
	}
	req.Artifacts = kept
}

// fail makes a result a failure (when it was a success) and adds why to
// its error.
func fail(req *protocol.ResultRequest, why string) {
	if req.FailureClass == "" {
		req.FailureClass = ClassFailure
	}
	if req.Error == "" {
		req.Error = why
	} else {
		req.Error += "; " + why
	}
}

// writeTail replaces the log at path (size bytes long) by its last bytes,
// under a first line saying how many bytes were cut, so that the whole
// file is at most maxSize bytes: the worker's disk holds no more of a log
// than the coordinator keeps. It writes path+".tail" (0600, as logs are),
// then renames it over path, and returns path.
func writeTail(path string, size, maxSize int64) (string, error) {
	keep := maxSize
	var header string
	for range 3 { // the header's length depends on the number it holds
		header = fmt.Sprintf("[wdc: the first %d bytes of this log were cut: it was %d bytes, more than max_artifact_size]\n", size-keep, size)
		keep = max(maxSize-int64(len(header)), 0)
	}
	if int64(len(header)) > maxSize {
		header, keep = header[:maxSize], 0
	}
	src, _, err := regularfile.Open(path)
	if err != nil {
		return "", err
	}
	defer src.Close()
	if _, err := src.Seek(size-keep, io.SeekStart); err != nil {
		return "", err
	}
	out := path + ".tail"
	dst, err := openFile(out, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600) // a log's copy: 0600, as the log
	if err != nil {
		return "", err
	}
	if _, err := io.WriteString(dst, header); err != nil {
		dst.Close()
		return "", err
	}
	if _, err := io.CopyN(dst, src, keep); err != nil {
		dst.Close()
		os.Remove(out)
		return "", err
	}
	if err := dst.Close(); err != nil {
		os.Remove(out)
		return "", err
	}
	if err := os.Rename(out, path); err != nil {
		os.Remove(out)
		return "", err
	}
	return path, nil
}
