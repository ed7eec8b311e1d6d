package state

import "testing"

// TestStatementJournalInMemory: SQLite took the setting at start-up (it is
// refused once SQLite is initialized, which would mean something opened a
// database before this package's init).
func TestStatementJournalInMemory(t *testing.T) {
	if !statementJournalInMemory {
		t.Fatal("SQLITE_CONFIG_STMTJRNL_SPILL was refused: SQLite was initialized before the state package's init")
	}
}
