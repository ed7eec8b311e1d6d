package state

import (
	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// statementJournalInMemory records whether configureSQLite set SQLite's
// statement journals to stay in memory (SQLITE_CONFIG_STMTJRNL_SPILL -1);
// false when SQLite refused (it was initialized before).
var statementJournalInMemory bool

func init() { statementJournalInMemory = configureSQLite() }

// configureSQLite sets, before any connection initializes SQLite, that
// statement journals are held in memory and never spill to a file
// (https://sqlite.org/c3ref/c_config_covering_index_scan.html,
// SQLITE_CONFIG_STMTJRNL_SPILL).
//
// Why: nearly every write statement of the state runs in a transaction of
// several and may abort (CHECK constraints, triggers that RAISE(ABORT)), so
// SQLite gives it a statement journal. With the default spill threshold of
// 64 KiB the in-memory journal allocates its chunks 64 KiB at a time, and
// the allocator of the pure-Go SQLite (modernc.org/memory) maps every
// allocation above 16 KiB with mmap and unmaps it when freed: two system
// calls per statement. With -1 the chunks are about 1 KiB, served from the
// allocator's pages. A statement journal holds the pages one statement
// changed, which for the state's statements is a few pages.
func configureSQLite() bool {
	tls := libc.NewTLS()
	defer tls.Close()
	va := libc.NewVaList(int32(-1))
	defer libc.Xfree(tls, va)
	return sqlite3.Xsqlite3_config(tls, sqlite3.SQLITE_CONFIG_STMTJRNL_SPILL, va) == sqlite3.SQLITE_OK
}
