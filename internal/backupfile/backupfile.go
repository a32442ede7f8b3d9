package backupfile

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"time"
)

// Version is the format version this build writes. It reads every
// version from MinVersion on: version 1 holds the meta group's part only,
// version 2 adds the data groups' parts (Group).
const Version = 2

// MinVersion is the oldest format version this build reads.
const MinVersion = 1

// Magic opens every backup file.
const Magic = "LOGDBKUP"

// Frame kinds.
const (
	kindHeader   byte = 'H'
	kindSnapshot byte = 'S'
	kindSegment  byte = 'G'
	kindData     byte = 'D'
	kindTrailer  byte = 'T'
	// kindGroup opens a data group's part (version 2 on).
	kindGroup byte = 'P'
)

const (
	prefixSize = len(Magic) + 4
	// frameOverhead is a frame's kind, length and CRC.
	frameOverhead = 1 + 8 + 4
	// maxJSONFrame bounds the JSON frames (header, segment, trailer), so
	// a damaged length cannot make a reader allocate without limit.
	maxJSONFrame = 1 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Errors of reading a backup. Each leaves the caller's state as it was:
// a restore reads the whole file before it installs anything.
var (
	// ErrTruncated means the file ends before its trailer.
	ErrTruncated = errors.New("backupfile: truncated")
	// ErrNotBackup means the file does not start with Magic.
	ErrNotBackup = errors.New("backupfile: not a logd backup")
	// ErrVersion means the file's format version is not one this build
	// reads.
	ErrVersion = errors.New("backupfile: unsupported format version")
)

// CorruptError reports a frame whose checksum, kind or content is not what
// the format requires.
type CorruptError struct {
	// Offset is the file offset of the frame.
	Offset int64
	Reason string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("backupfile: corrupt at byte %d: %s", e.Offset, e.Reason)
}

// Member is one server of the Raft configuration the snapshot holds.
type Member struct {
	ID      string `json:"id"`
	Address string `json:"address"`
	Voter   bool   `json:"voter"`
}

// Header describes a backup; it is the file's first frame.
type Header struct {
	// FormatVersion is the version the file was written in (Version when
	// written by this build).
	FormatVersion int `json:"format_version"`
	// Cluster is the Raft configuration at the snapshot: logd has no
	// cluster id of its own, so a backup names its cluster by members.
	Cluster []Member `json:"cluster"`
	// Node is the id of the node that wrote the backup.
	Node string `json:"node"`
	// Index and Term are the Raft index and term of the meta group's
	// snapshot: the backup holds every entry of the meta group applied up
	// to Index and nothing after (each data group's part names its own).
	Index uint64 `json:"index"`
	Term  uint64 `json:"term"`
	// FeatureLevel is the highest feature level an applied entry needed,
	// in any group of the backup; a build below it cannot restore it.
	FeatureLevel int `json:"feature_level"`
	// Created is when the snapshot was taken, by the writing node's clock.
	Created time.Time `json:"created"`
	// BuildVersion is the writing node's logd version.
	BuildVersion string `json:"build_version,omitempty"`
	// SnapshotBytes is the size of the meta group's snapshot frame's
	// payload.
	SnapshotBytes int64 `json:"snapshot_bytes"`
	// Segments and SegmentBytes count the segment frames of the whole
	// file and their data, every group's.
	Segments     int   `json:"segments"`
	SegmentBytes int64 `json:"segment_bytes"`
	// Groups are the data groups' parts, in the order they follow the
	// meta group's (version 2 on; none in version 1).
	Groups []Group `json:"groups,omitempty"`
}

// Group describes one data group's part of a backup (version 2 on): a
// group frame holding it opens the part, then come the group's snapshot
// frame and its segments' frames, as the meta group's.
type Group struct {
	// ID is the data group's id.
	ID uint64 `json:"id"`
	// Node is the node whose replica of the group the part was read
	// from.
	Node string `json:"node"`
	// Index and Term are the Raft index and term of the group's
	// snapshot.
	Index uint64 `json:"index"`
	Term  uint64 `json:"term"`
	// FeatureLevel is the highest feature level an entry the group
	// applied needed.
	FeatureLevel int `json:"feature_level"`
	// Cluster is the group's Raft configuration at the snapshot.
	Cluster []Member `json:"cluster"`
	// SnapshotBytes is the size of the group's snapshot frame's payload.
	SnapshotBytes int64 `json:"snapshot_bytes"`
	// Segments and SegmentBytes count the group's segment frames and
	// their data.
	Segments     int   `json:"segments"`
	SegmentBytes int64 `json:"segment_bytes"`
}

// Segment describes one segment of one partition; its data follows in a
// data frame of Bytes bytes.
type Segment struct {
	Topic      string `json:"topic"`
	TopicIndex uint64 `json:"topic_index"`
	Partition  int32  `json:"partition"`
	Base       int64  `json:"base"`
	End        int64  `json:"end"`
	Bytes      int64  `json:"bytes"`
	// Meta is the segment's .meta file.
	Meta []byte `json:"meta"`
}

// Trailer closes a backup.
type Trailer struct {
	// Frames counts the frames before the trailer.
	Frames int `json:"frames"`
	// SHA256 is the hex SHA-256 of every byte before the trailer frame.
	SHA256 string `json:"sha256"`
}

// EncodedSize is the size of the file a Writer makes of h and segs (the
// meta group's segments) and groupSegs (groupSegs[i] the segments of
// h.Groups[i]), for showing progress before it is written. The
// SnapshotBytes of h and of its groups must be set.
func EncodedSize(h Header, segs []Segment, groupSegs ...[]Segment) (int64, error) {
	if len(groupSegs) != len(h.Groups) {
		return 0, fmt.Errorf("backupfile: %d groups' segments for %d groups", len(groupSegs), len(h.Groups))
	}
	h.FormatVersion = Version
	hb, err := json.Marshal(h)
	if err != nil {
		return 0, err
	}
	n := int64(prefixSize) + frameOverhead + int64(len(hb))
	frames := 1
	part := func(snapshot int64, segs []Segment) error {
		n += frameOverhead + snapshot
		frames += 1 + 2*len(segs)
		for _, s := range segs {
			sb, err := json.Marshal(s)
			if err != nil {
				return err
			}
			n += 2*frameOverhead + int64(len(sb)) + s.Bytes
		}
		return nil
	}
	if err := part(h.SnapshotBytes, segs); err != nil {
		return 0, err
	}
	for i, g := range h.Groups {
		gb, err := json.Marshal(g)
		if err != nil {
			return 0, err
		}
		n += frameOverhead + int64(len(gb))
		frames++
		if err := part(g.SnapshotBytes, groupSegs[i]); err != nil {
			return 0, err
		}
	}
	tb, err := json.Marshal(Trailer{Frames: frames, SHA256: hex.EncodeToString(make([]byte, sha256.Size))})
	if err != nil {
		return 0, err
	}
	return n + frameOverhead + int64(len(tb)), nil
}

// Writer writes a backup: NewWriter writes the header, then WriteSnapshot
// once and WriteSegment for each of the meta group's segments; then, for
// each of the header's groups in its order, WriteGroup, WriteSnapshot and
// WriteSegment for each of the group's segments; and Close the trailer.
// It buffers nothing beyond a frame's head.
type Writer struct {
	w      io.Writer
	sum    hash.Hash
	frames int
	err    error
	// groups are the header's groups; written counts those written.
	groups  []Group
	written int
}

// NewWriter writes the file's prefix and header to w.
func NewWriter(w io.Writer, h Header) (*Writer, error) {
	bw := &Writer{sum: sha256.New(), groups: h.Groups}
	bw.w = io.MultiWriter(w, bw.sum)
	h.FormatVersion = Version
	var pre [prefixSize]byte
	copy(pre[:], Magic)
	binary.BigEndian.PutUint32(pre[len(Magic):], Version)
	if _, err := bw.w.Write(pre[:]); err != nil {
		return nil, err
	}
	if err := bw.writeJSON(kindHeader, h); err != nil {
		return nil, err
	}
	return bw, nil
}

func (bw *Writer) writeJSON(kind byte, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return bw.writeFrame(kind, int64(len(b)), bytes.NewReader(b))
}

// writeFrame copies exactly n bytes of r into a frame.
func (bw *Writer) writeFrame(kind byte, n int64, r io.Reader) error {
	if bw.err != nil {
		return bw.err
	}
	var head [9]byte
	head[0] = kind
	binary.BigEndian.PutUint64(head[1:], uint64(n))
	crc := crc32.New(castagnoli)
	crc.Write(head[:])
	if _, err := bw.w.Write(head[:]); err != nil {
		bw.err = err
		return err
	}
	copied, err := io.Copy(io.MultiWriter(bw.w, crc), io.LimitReader(r, n))
	if err == nil && copied != n {
		err = fmt.Errorf("backupfile: frame of %d bytes: source gave %d", n, copied)
	}
	if err != nil {
		bw.err = err
		return err
	}
	var tail [4]byte
	binary.BigEndian.PutUint32(tail[:], crc.Sum32())
	if _, err := bw.w.Write(tail[:]); err != nil {
		bw.err = err
		return err
	}
	bw.frames++
	return nil
}

// WriteSnapshot writes the snapshot frame: exactly n bytes of r.
func (bw *Writer) WriteSnapshot(n int64, r io.Reader) error {
	return bw.writeFrame(kindSnapshot, n, r)
}

// WriteSegment writes a segment frame and its data frame: exactly s.Bytes
// bytes of data.
func (bw *Writer) WriteSegment(s Segment, data io.Reader) error {
	if err := bw.writeJSON(kindSegment, s); err != nil {
		return err
	}
	return bw.writeFrame(kindData, s.Bytes, data)
}

// WriteGroup opens the part of the header's next group, which must be g.
func (bw *Writer) WriteGroup(g Group) error {
	if bw.written >= len(bw.groups) || bw.groups[bw.written].ID != g.ID {
		return fmt.Errorf("backupfile: data group %d is not the header's next group", g.ID)
	}
	bw.written++
	return bw.writeJSON(kindGroup, g)
}

// Close writes the trailer. It does not close the underlying writer.
func (bw *Writer) Close() error {
	if bw.err != nil {
		return bw.err
	}
	if bw.written != len(bw.groups) {
		return fmt.Errorf("backupfile: %d of the header's %d data groups written", bw.written, len(bw.groups))
	}
	t := Trailer{Frames: bw.frames, SHA256: hex.EncodeToString(bw.sum.Sum(nil))}
	return bw.writeJSON(kindTrailer, t)
}

// Reader reads a backup frame by frame, checking each frame's CRC as its
// payload is read and the trailer at the end.
type Reader struct {
	r      io.Reader
	sum    hash.Hash
	off    int64 // bytes read so far
	header Header
	frames int
	// cur is the payload being read; nil between frames.
	cur *payload
	// state: 0 before a part's snapshot, 1 before a segment, a group or
	// the trailer, 2 done, 3 at a group whose snapshot NextGroup hands
	// on.
	state int
	// groups counts the group frames read; group is the last one's.
	groups int
	group  Group
}

// NewReader reads and checks the prefix and header of a backup.
func NewReader(r io.Reader) (*Reader, error) {
	br := &Reader{sum: sha256.New()}
	br.r = io.TeeReader(r, br.sum)
	var pre [prefixSize]byte
	if _, err := io.ReadFull(br.r, pre[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: %d bytes", ErrNotBackup, br.off)
		}
		return nil, err
	}
	br.off = int64(prefixSize)
	if string(pre[:len(Magic)]) != Magic {
		return nil, ErrNotBackup
	}
	v := binary.BigEndian.Uint32(pre[len(Magic):])
	if v < MinVersion || v > Version {
		return nil, fmt.Errorf("%w: %d (this build reads %d to %d)", ErrVersion, v, MinVersion, Version)
	}
	if err := br.readJSON(kindHeader, &br.header); err != nil {
		return nil, err
	}
	if br.header.FormatVersion != int(v) {
		return nil, fmt.Errorf("%w: header says %d, the file %d", ErrVersion, br.header.FormatVersion, v)
	}
	if v < 2 && len(br.header.Groups) > 0 {
		return nil, &CorruptError{Offset: int64(prefixSize), Reason: fmt.Sprintf("a version %d header with data groups", v)}
	}
	return br, nil
}

// Header is the backup's header.
func (br *Reader) Header() Header { return br.header }

func truncated(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return ErrTruncated
	}
	return err
}

// next starts the next frame, which must be of one of kinds, after
// draining (and so checking) the current one.
func (br *Reader) next(kinds ...byte) (*payload, byte, error) {
	if br.cur != nil {
		if _, err := io.Copy(io.Discard, br.cur); err != nil {
			return nil, 0, err
		}
		br.cur = nil
	}
	start := br.off
	var head [9]byte
	if _, err := io.ReadFull(br.r, head[:]); err != nil {
		return nil, 0, fmt.Errorf("frame at byte %d: %w", start, truncated(err))
	}
	br.off += int64(len(head))
	if !bytes.ContainsRune(kinds, rune(head[0])) {
		return nil, 0, &CorruptError{Offset: start, Reason: fmt.Sprintf("frame of kind %q where %q was expected", head[0], kinds)}
	}
	n := binary.BigEndian.Uint64(head[1:])
	if n > 1<<62 {
		return nil, 0, &CorruptError{Offset: start, Reason: fmt.Sprintf("frame length %d", n)}
	}
	crc := crc32.New(castagnoli)
	crc.Write(head[:])
	p := &payload{br: br, left: int64(n), crc: crc, start: start}
	br.cur = p
	br.frames++
	return p, head[0], nil
}

func (br *Reader) readJSON(kind byte, v any) error {
	p, _, err := br.next(kind)
	if err != nil {
		return err
	}
	if p.left > maxJSONFrame {
		return &CorruptError{Offset: p.start, Reason: fmt.Sprintf("%q frame of %d bytes", kind, p.left)}
	}
	b, err := io.ReadAll(p)
	if err != nil {
		return err
	}
	br.cur = nil
	if err := json.Unmarshal(b, v); err != nil {
		return &CorruptError{Offset: p.start, Reason: fmt.Sprintf("%q frame: %v", kind, err)}
	}
	return nil
}

// Snapshot returns the current part's snapshot frame's payload (the meta
// group's, Header().SnapshotBytes long, first; after NextGroup, the
// group's). Reading it to its end checks its CRC.
func (br *Reader) Snapshot() (io.Reader, error) {
	if br.state != 0 {
		return nil, errors.New("backupfile: snapshot already read")
	}
	p, _, err := br.next(kindSnapshot)
	if err != nil {
		return nil, err
	}
	br.state = 1
	return p, nil
}

// NextSegment returns the current part's next segment and its data
// (s.Bytes long). After the part's last one it returns io.EOF: at the
// end of the file, once it read and checked the trailer; before a data
// group's part, which NextGroup opens.
func (br *Reader) NextSegment() (Segment, io.Reader, error) {
	if br.state == 0 {
		if _, err := br.Snapshot(); err != nil {
			return Segment{}, nil, err
		}
	}
	if br.state == 2 || br.state == 3 {
		return Segment{}, nil, io.EOF
	}
	if br.cur != nil {
		if _, err := io.Copy(io.Discard, br.cur); err != nil {
			return Segment{}, nil, err
		}
		br.cur = nil
	}
	// The digest covers every byte before the trailer frame.
	sum := hex.EncodeToString(br.sum.Sum(nil))
	frames := br.frames
	kinds := []byte{kindSegment, kindTrailer}
	if br.header.FormatVersion >= 2 {
		kinds = append(kinds, kindGroup)
	}
	p, kind, err := br.next(kinds...)
	if err != nil {
		return Segment{}, nil, err
	}
	if p.left > maxJSONFrame {
		return Segment{}, nil, &CorruptError{Offset: p.start, Reason: fmt.Sprintf("%q frame of %d bytes", kind, p.left)}
	}
	b, err := io.ReadAll(p)
	if err != nil {
		return Segment{}, nil, err
	}
	br.cur = nil
	if kind == kindGroup {
		return Segment{}, nil, br.openGroup(p.start, b)
	}
	if kind == kindTrailer {
		if br.groups != len(br.header.Groups) {
			return Segment{}, nil, &CorruptError{Offset: p.start, Reason: fmt.Sprintf("trailer after %d of the header's %d data groups", br.groups, len(br.header.Groups))}
		}
		var t Trailer
		if err := json.Unmarshal(b, &t); err != nil {
			return Segment{}, nil, &CorruptError{Offset: p.start, Reason: fmt.Sprintf("trailer: %v", err)}
		}
		if t.Frames != frames || t.SHA256 != sum {
			return Segment{}, nil, &CorruptError{Offset: p.start, Reason: fmt.Sprintf("trailer: %d frames with SHA-256 %s, read %d with %s", t.Frames, t.SHA256, frames, sum)}
		}
		// Nothing may follow the trailer.
		var one [1]byte
		if n, _ := io.ReadFull(br.r, one[:]); n != 0 {
			return Segment{}, nil, &CorruptError{Offset: br.off, Reason: "bytes after the trailer"}
		}
		br.state = 2
		return Segment{}, nil, io.EOF
	}
	var s Segment
	if err := json.Unmarshal(b, &s); err != nil {
		return Segment{}, nil, &CorruptError{Offset: p.start, Reason: fmt.Sprintf("segment frame: %v", err)}
	}
	d, _, err := br.next(kindData)
	if err != nil {
		return Segment{}, nil, err
	}
	if d.left != s.Bytes {
		return Segment{}, nil, &CorruptError{Offset: d.start, Reason: fmt.Sprintf("data frame of %d bytes for a segment of %d", d.left, s.Bytes)}
	}
	return s, d, nil
}

// openGroup takes the group frame at offset off, whose payload is b: the
// header's next group, which NextGroup hands on. It returns io.EOF, the
// end of the part before it.
func (br *Reader) openGroup(off int64, b []byte) error {
	var g Group
	if err := json.Unmarshal(b, &g); err != nil {
		return &CorruptError{Offset: off, Reason: fmt.Sprintf("group frame: %v", err)}
	}
	if br.groups >= len(br.header.Groups) {
		return &CorruptError{Offset: off, Reason: fmt.Sprintf("data group %d beyond the header's %d", g.ID, len(br.header.Groups))}
	}
	if want := br.header.Groups[br.groups]; !sameGroup(g, want) {
		return &CorruptError{Offset: off, Reason: fmt.Sprintf("data group %d at index %d where the header lists %d at %d", g.ID, g.Index, want.ID, want.Index)}
	}
	br.groups++
	br.group = g
	br.state = 3
	return io.EOF
}

func sameGroup(a, b Group) bool {
	if a.ID != b.ID || a.Node != b.Node || a.Index != b.Index || a.Term != b.Term || a.FeatureLevel != b.FeatureLevel ||
		a.SnapshotBytes != b.SnapshotBytes || a.Segments != b.Segments || a.SegmentBytes != b.SegmentBytes || len(a.Cluster) != len(b.Cluster) {
		return false
	}
	for i := range a.Cluster {
		if a.Cluster[i] != b.Cluster[i] {
			return false
		}
	}
	return true
}

// NextGroup passes over what is left of the current part (checking it)
// and opens the next data group's part: Snapshot then reads the group's
// snapshot and NextSegment its segments. After the last group it reads and
// checks the trailer and returns io.EOF.
func (br *Reader) NextGroup() (Group, error) {
	for br.state == 0 || br.state == 1 {
		_, d, err := br.NextSegment()
		if err == io.EOF {
			break
		}
		if err != nil {
			return Group{}, err
		}
		if _, err := io.Copy(io.Discard, d); err != nil {
			return Group{}, err
		}
	}
	if br.state == 2 {
		return Group{}, io.EOF
	}
	br.state = 0
	return br.group, nil
}

// payload reads one frame's payload and then checks its CRC: the read
// that reaches its end returns io.EOF only if the CRC matches.
type payload struct {
	br    *Reader
	left  int64
	crc   hash.Hash32
	start int64
	done  bool
	err   error
}

func (p *payload) Read(b []byte) (int, error) {
	if p.err != nil {
		return 0, p.err
	}
	if p.left == 0 {
		if !p.done {
			p.done = true
			var tail [4]byte
			if _, err := io.ReadFull(p.br.r, tail[:]); err != nil {
				p.err = fmt.Errorf("frame at byte %d: %w", p.start, truncated(err))
				return 0, p.err
			}
			p.br.off += 4
			if got, want := p.crc.Sum32(), binary.BigEndian.Uint32(tail[:]); got != want {
				p.err = &CorruptError{Offset: p.start, Reason: fmt.Sprintf("frame CRC %08x, computed %08x", want, got)}
				return 0, p.err
			}
		}
		return 0, io.EOF
	}
	if int64(len(b)) > p.left {
		b = b[:p.left]
	}
	n, err := p.br.r.Read(b)
	p.crc.Write(b[:n])
	p.left -= int64(n)
	p.br.off += int64(n)
	if err == io.EOF && p.left > 0 {
		p.err = fmt.Errorf("frame at byte %d: %w", p.start, ErrTruncated)
		return n, p.err
	}
	if err != nil && err != io.EOF {
		p.err = err
		return n, err
	}
	return n, nil
}
