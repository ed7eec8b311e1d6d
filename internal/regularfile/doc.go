// Package regularfile opens and reads the files wdc is given or finds
// (configuration, var files, join files, saved plans, spool entries,
// credentials, inputs) safely: it opens without blocking, so a FIFO in a
// file's place cannot hold the caller (an open of a FIFO for reading waits
// for a writer); it takes only a regular file, saying what the path is
// instead (a FIFO, a device, a directory, a socket); and Read reads at
// most a bound, so a file that never ends (/dev/zero behind a symbolic
// link) or a huge one cannot exhaust memory.
//
// It owns only the opening, the check and the bound; each caller owns its
// limit (documented with the kind of file it reads) and the message around
// the error. Files wdc has just written itself need none of this.
package regularfile
