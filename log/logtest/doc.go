// Package logtest provides file systems for tests of code that stores data
// through log.FS: the faults a disk and a power cut cause, injected at the
// seam instead of hoped for.
//
// Two types compose, as in-memory file systems and error-injecting layers do
// in storage engines:
//
//   - MemFS keeps files in memory and models durability: it remembers, for
//     every file, the bytes as of its last Sync, and for every directory the
//     entries as of its last SyncDir. CrashClone returns what a power cut
//     would leave (unsynced bytes and unsynced creations, removals and
//     renames are lost); FlipBit and SetData damage files as media errors or
//     torn writes found after a crash would.
//   - FaultFS wraps any log.FS (a MemFS, or log.OSFS when other code shares
//     the directory) and injects failures: a write that stores only some of
//     its bytes and fails (a torn write, ENOSPC), a failing fsync (EIO), a
//     slow fsync, a read that fails (EIO) or comes back short, and a
//     process that dies at its n-th mutating operation.
//     Over a file system that cannot be cloned it also models a power cut
//     of file contents: DropUnsynced truncates every file it opened to its
//     last synced size.
//
// Faults are given as values (Fault) or through the shortcuts
// FailNextWrite, FailNextSync, FailNextRead and ShortNextRead. Errors are *fs.PathError wrapping the injected error, so
// callers test them with errors.Is, as they would a real one.
//
// Both types are safe for concurrent use. They are meant for tests: files
// are whole byte slices, every operation takes one lock, and nothing is
// bounded.
package logtest
