package histcheck

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// header is the first line of a history file; format names its version.
type header struct {
	Format string `json:"format"`
}

// formatV1 is the only format so far: one Op per line after the header.
const formatV1 = "logd-histcheck/1"

// Save writes ops as JSON lines: a header line, then one Op per line.
func Save(w io.Writer, ops []Op) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	if err := enc.Encode(header{Format: formatV1}); err != nil {
		return fmt.Errorf("save history: %w", err)
	}
	for i := range ops {
		if err := enc.Encode(&ops[i]); err != nil {
			return fmt.Errorf("save history: op %d: %w", ops[i].ID, err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("save history: %w", err)
	}
	return nil
}

// SaveFile writes ops to path (created or truncated) with Save.
func SaveFile(path string, ops []Op) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("save history: %w", err)
	}
	if err := Save(f, ops); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("save history: %w", err)
	}
	return nil
}

// maxLine bounds one line of a history file (a scan of a large partition
// is one line).
const maxLine = 256 << 20

// Load reads a history Save wrote. A malformed line is a *LineError
// wrapping ErrFormat or the JSON error; a call Validate refuses is an
// *OpError wrapping ErrInvalid.
func Load(r io.Reader) ([]Op, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	var ops []Op
	line := 0
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if line == 1 {
			var h header
			if err := json.Unmarshal(b, &h); err != nil || h.Format != formatV1 {
				return nil, &LineError{Line: line, Err: fmt.Errorf("%w: header %.60q, want format %q", ErrFormat, b, formatV1)}
			}
			continue
		}
		if len(b) == 0 {
			continue
		}
		var op Op
		if err := json.Unmarshal(b, &op); err != nil {
			return nil, &LineError{Line: line, Err: err}
		}
		ops = append(ops, op)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("load history: line %d: %w", line+1, err)
	}
	if line == 0 {
		return nil, &LineError{Line: 1, Err: fmt.Errorf("%w: empty", ErrFormat)}
	}
	if err := Validate(ops); err != nil {
		return nil, fmt.Errorf("load history: %w", err)
	}
	return ops, nil
}

// LoadFile reads the history Save wrote to path.
func LoadFile(path string) ([]Op, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load history: %w", err)
	}
	defer f.Close()
	ops, err := Load(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ops, nil
}
