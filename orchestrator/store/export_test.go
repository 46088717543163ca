package store

// QueuedAppends is how many appends wait for the next group (tests).
func (s *Store) QueuedAppends() int {
	s.group.mu.Lock()
	defer s.group.mu.Unlock()
	return len(s.group.queue)
}
