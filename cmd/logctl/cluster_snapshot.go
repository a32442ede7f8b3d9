package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/spf13/cobra"

	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/internal/backupfile"
)

func newClusterSnapshotCmd(opts *globalOpts) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "snapshot",
		Short: "Save a backup of the cluster, or inspect one",
		Long: `A backup is the cluster's state: the meta group's at one Raft index, and
each data group's at one index of its own, taken after it. It holds every
topic's records, group offsets, queue state, idempotency keys, tokens
(their salted hashes) and ACLs. It is restored into a new cluster with "logd restore"
(docs/operations.md, "Backup and restore"). It holds everything the cluster
holds: keep the file as a secret.`,
	}
	cmd.AddCommand(newClusterSnapshotSaveCmd(opts), newClusterSnapshotInspectCmd(opts))
	return cmd
}

func newClusterSnapshotSaveCmd(opts *globalOpts) *cobra.Command {
	var (
		output   string
		progress bool
	)
	cmd := &cobra.Command{
		Use:   "save FILE",
		Short: "Save a backup of the cluster's state into FILE",
		Long: `Asks the leader for a backup (a Raft snapshot of the meta group and of each
data group holding partitions, and the segment bytes each lists) and writes
it to FILE, through a temporary file renamed into place
once the whole backup is in, so FILE is never a partial backup. Progress in
bytes goes to stderr on a terminal (or with --progress). Needs admin on the
cluster when the cluster requires authentication.`,
		Example: `  logctl cluster snapshot save backup.logd
  logctl cluster snapshot save /backups/logd-2026-12-01.logd --output json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return opts.withClient(output, func(c *client.Client) error {
				info, err := saveSnapshot(cmd, opts, c, args[0], progress || isTerminal(opts.stderr))
				if err != nil {
					return err
				}
				if output != outputText {
					return writeData(opts.stdout, output, info)
				}
				groups := ""
				if info.DataGroups > 0 {
					groups = ", " + count(info.DataGroups, "data group")
				}
				fmt.Fprintf(opts.stdout, "saved %s: index %d, term %d%s, %s, %s of segments in %s, from %s\n", args[0], info.Index, info.Term,
					groups, formatBytes(info.Bytes), formatBytes(info.SegmentBytes), count(info.Segments, "segment"), info.NodeID)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&progress, "progress", false, "report progress on stderr even when it is not a terminal")
	addOutputFlag(cmd, &output)
	return cmd
}

// saveSnapshot streams the backup into a temporary file beside path, syncs
// it and renames it to path.
func saveSnapshot(cmd *cobra.Command, opts *globalOpts, c *client.Client, path string, showProgress bool) (client.SnapshotInfo, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return client.SnapshotInfo{}, err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after a rename: nothing to remove
	// The backup holds token hashes and ACLs.
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return client.SnapshotInfo{}, err
	}
	var (
		bar     *progress
		started bool
		last    int64
	)
	info, err := c.SaveSnapshot(cmd.Context(), f, func(done, total int64) {
		if !started {
			started = true
			bar = opts.newProgress(showProgress, total, bytesLabel)
			bar.Start()
		}
		bar.Add(done-last, 0, 0)
		last = done
	})
	bar.Stop()
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return info, err
	}
	return info, os.Rename(tmp, path)
}

// snapshotReport is what inspect prints.
type snapshotReport struct {
	File         string               `json:"file"`
	Bytes        int64                `json:"bytes"`
	Format       int                  `json:"format_version"`
	Index        uint64               `json:"index"`
	Term         uint64               `json:"term"`
	FeatureLevel int                  `json:"feature_level"`
	Created      time.Time            `json:"created"`
	Node         string               `json:"node"`
	Cluster      []backupfile.Member  `json:"cluster"`
	Snapshot     int64                `json:"snapshot_bytes"`
	Segments     int                  `json:"segments"`
	SegmentBytes int64                `json:"segment_bytes"`
	Topics       []snapshotTopicUsage `json:"topics"`
	// DataGroups are the data groups' parts, after the meta group's.
	DataGroups []backupfile.Group `json:"data_groups"`
	// Verified: every frame's CRC and the trailer's SHA-256 matched.
	Verified bool `json:"verified"`
}

type snapshotTopicUsage struct {
	Topic      string `json:"topic"`
	Partitions int    `json:"partitions_with_segments"`
	Segments   int    `json:"segments"`
	Bytes      int64  `json:"bytes"`
}

func newClusterSnapshotInspectCmd(opts *globalOpts) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "inspect FILE",
		Short: "Check a backup file and describe it",
		Long: `Reads the whole backup, checks every frame's CRC and the trailer's SHA-256,
and prints its header (Raft index and term, feature level, the cluster it
was taken from), each data group's part (the node it was read from, its
Raft index and term, its segments) and the segment bytes per topic. A truncated or damaged
file is an error: it is what "logd restore" would refuse. Needs no server.`,
		Example: `  logctl cluster snapshot inspect backup.logd
  logctl cluster snapshot inspect backup.logd -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			rep, err := inspectSnapshot(args[0])
			if err != nil {
				return err
			}
			if output != outputText {
				return writeData(opts.stdout, output, rep)
			}
			w := opts.stdout
			fmt.Fprintf(w, "File:           %s (%s)\n", rep.File, formatBytes(rep.Bytes))
			fmt.Fprintf(w, "Format:         %d\n", rep.Format)
			fmt.Fprintf(w, "Raft index:     %d (term %d)\n", rep.Index, rep.Term)
			fmt.Fprintf(w, "Feature level:  %d\n", rep.FeatureLevel)
			fmt.Fprintf(w, "Created:        %s by %s\n", rep.Created.Format(time.RFC3339), rep.Node)
			for i, m := range rep.Cluster {
				label := "Cluster:"
				if i > 0 {
					label = ""
				}
				role := "voter"
				if !m.Voter {
					role = "nonvoter"
				}
				fmt.Fprintf(w, "%-16s%s %s %s\n", label, m.ID, m.Address, role)
			}
			fmt.Fprintf(w, "Snapshot:       %s\n", formatBytes(rep.Snapshot))
			fmt.Fprintf(w, "Segments:       %s, %s\n", count(rep.Segments, "segment"), formatBytes(rep.SegmentBytes))
			fmt.Fprintf(w, "Verified:       every frame's CRC and the file's SHA-256\n\n")
			tw := newTable(w)
			if len(rep.DataGroups) > 0 {
				fmt.Fprintln(tw, "DATA GROUP\tFROM\tINDEX\tTERM\tSEGMENTS\tBYTES")
				for _, g := range rep.DataGroups {
					fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d\t%s\n", g.ID, g.Node, g.Index, g.Term, g.Segments, formatBytes(g.SegmentBytes))
				}
				if err := tw.Flush(); err != nil {
					return err
				}
				fmt.Fprintln(w)
				tw = newTable(w)
			}
			fmt.Fprintln(tw, "TOPIC\tPARTITIONS\tSEGMENTS\tBYTES")
			for _, t := range rep.Topics {
				fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", t.Topic, t.Partitions, t.Segments, formatBytes(t.Bytes))
			}
			return tw.Flush()
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}

// inspectSnapshot reads and checks a whole backup file.
func inspectSnapshot(path string) (snapshotReport, error) {
	f, err := os.Open(path)
	if err != nil {
		return snapshotReport{}, err
	}
	defer f.Close()
	r, err := backupfile.NewReader(f)
	if err != nil {
		return snapshotReport{}, fmt.Errorf("%s: %w", path, err)
	}
	h := r.Header()
	rep := snapshotReport{File: path, Format: h.FormatVersion, Index: h.Index, Term: h.Term, FeatureLevel: h.FeatureLevel,
		Created: h.Created, Node: h.Node, Cluster: h.Cluster, Snapshot: h.SnapshotBytes, DataGroups: h.Groups}
	if rep.Cluster == nil {
		rep.Cluster = []backupfile.Member{}
	}
	if rep.DataGroups == nil {
		rep.DataGroups = []backupfile.Group{}
	}
	topics := map[string]*snapshotTopicUsage{}
	parts := map[string]map[int32]bool{}
	for {
		s, data, err := r.NextSegment()
		if errors.Is(err, io.EOF) {
			// The end of a part: the next data group's, or the file's.
			if _, err := r.NextGroup(); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return snapshotReport{}, fmt.Errorf("%s: %w", path, err)
			}
			continue
		}
		if err != nil {
			return snapshotReport{}, fmt.Errorf("%s: %w", path, err)
		}
		if _, err := io.Copy(io.Discard, data); err != nil {
			return snapshotReport{}, fmt.Errorf("%s: %w", path, err)
		}
		t := topics[s.Topic]
		if t == nil {
			t = &snapshotTopicUsage{Topic: s.Topic}
			topics[s.Topic], parts[s.Topic] = t, map[int32]bool{}
		}
		t.Segments++
		t.Bytes += s.Bytes
		rep.Segments++
		rep.SegmentBytes += s.Bytes
		if s.Bytes > 0 && !parts[s.Topic][s.Partition] {
			parts[s.Topic][s.Partition] = true
			t.Partitions++
		}
	}
	if rep.Segments != h.Segments || rep.SegmentBytes != h.SegmentBytes {
		return snapshotReport{}, fmt.Errorf("%s: %w", path, &backupfile.CorruptError{
			Reason: fmt.Sprintf("header lists %d segments of %d bytes, the file holds %d of %d", h.Segments, h.SegmentBytes, rep.Segments, rep.SegmentBytes)})
	}
	rep.Topics = make([]snapshotTopicUsage, 0, len(topics))
	for _, t := range topics {
		rep.Topics = append(rep.Topics, *t)
	}
	sort.Slice(rep.Topics, func(i, j int) bool { return rep.Topics[i].Topic < rep.Topics[j].Topic })
	if fi, err := f.Stat(); err == nil {
		rep.Bytes = fi.Size()
	}
	rep.Verified = true
	return rep, nil
}
