package inbox

// Apart switches the protection off: the id is recorded after the
// effect's transaction, and hook (if not nil) runs between the two.
func Apart(ib *Inbox, hook func() error) { ib.apart, ib.hook = true, hook }
