package files

import (
	"container/list"
	"sync"
)

// Cache keeps the contents of files read often (the text tier reads a
// whole file for every range of lines), and what was parsed from them
// (a format tool's workbook or document), in memory up to a number of
// bytes, least recently used out first. An entry is keyed by workspace and
// inode and belongs to one generation of the content (vfs FileInfo.Gen,
// which every write moves, through any API or the mount): a read of
// another generation drops it (an invalidation) and reads again.
type Cache struct {
	mu    sync.Mutex // guards everything below (leaf)
	limit int64
	used  int64
	ll    *list.List // of *cacheEntry, most recent first
	byKey map[CacheKey]*list.Element
	stats CacheStats
}

// CacheKey names a file of a workspace.
type CacheKey struct {
	Workspace string
	Ino       int64
}

type cacheEntry struct {
	key    CacheKey
	gen    int64
	hash   string
	data   []byte // nil: only parsed values
	parsed map[string]parsed
	size   int64 // bytes counted against the limit
}

type parsed struct {
	v    any
	size int64
}

// CacheStats counts what the cache did since the server started.
type CacheStats struct {
	Hits          int64 `json:"hits"`
	Misses        int64 `json:"misses"`
	Evictions     int64 `json:"evictions" jsonschema_description:"entries dropped to make room"`
	Invalidations int64 `json:"invalidations" jsonschema_description:"entries dropped because their file changed"`
	Entries       int64 `json:"entries"`
	Bytes         int64 `json:"bytes"`
	Capacity      int64 `json:"capacity_bytes"`
}

// NewCache returns a cache of at most limit bytes (0: it keeps nothing).
func NewCache(limit int64) *Cache {
	return &Cache{limit: limit, ll: list.New(), byKey: map[CacheKey]*list.Element{}}
}

// Stats returns the counters and the current size.
func (c *Cache) Stats() CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.Entries, s.Bytes, s.Capacity = int64(c.ll.Len()), c.used, c.limit
	return s
}

// entry returns k's entry of generation gen (dropping one of another),
// counting a hit or a miss of what; it moves it to the front.
func (c *Cache) entryLocked(k CacheKey, gen int64) *cacheEntry {
	el, ok := c.byKey[k]
	if !ok {
		return nil
	}
	e := el.Value.(*cacheEntry)
	if e.gen != gen {
		c.stats.Invalidations++
		c.removeLocked(el)
		return nil
	}
	c.ll.MoveToFront(el)
	return e
}

// Bytes returns the content of k at generation gen and its hash, if kept.
// The caller must not change the bytes.
func (c *Cache) Bytes(k CacheKey, gen int64) ([]byte, string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entryLocked(k, gen)
	if e == nil || e.data == nil {
		c.stats.Misses++
		return nil, "", false
	}
	c.stats.Hits++
	return e.data, e.hash, true
}

// PutBytes keeps data (which the caller no longer changes) as k's content
// at generation gen, with its hash. Content larger than a quarter of the
// cache is not kept.
func (c *Cache) PutBytes(k CacheKey, gen int64, hash string, data []byte) {
	if int64(len(data)) > c.limit/4 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entryLocked(k, gen)
	if e == nil {
		e = &cacheEntry{key: k, gen: gen}
		c.byKey[k] = c.ll.PushFront(e)
	}
	if e.data == nil {
		e.data, e.hash = data, hash
		e.size += int64(len(data))
		c.used += int64(len(data))
	}
	c.evictLocked()
}

// Parsed returns what load made of k at generation gen (kind names the
// parse: "xlsx", "pdf", ...), calling load on a miss and keeping its value
// with the size it reports. Values are shared: callers must not change
// them. load runs without the cache's lock (two callers may both load).
func (c *Cache) Parsed(k CacheKey, gen int64, kind string, load func() (v any, size int64, err error)) (any, error) {
	c.mu.Lock()
	if e := c.entryLocked(k, gen); e != nil {
		if p, ok := e.parsed[kind]; ok {
			c.stats.Hits++
			c.mu.Unlock()
			return p.v, nil
		}
	}
	c.stats.Misses++
	c.mu.Unlock()
	v, size, err := load()
	if err != nil {
		return v, err
	}
	c.PutParsed(k, gen, kind, v, size)
	return v, nil
}

// PutParsed keeps v, of size bytes, as what kind made of k at generation
// gen (a value larger than a quarter of the cache is not kept).
func (c *Cache) PutParsed(k CacheKey, gen int64, kind string, v any, size int64) {
	if size > c.limit/4 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entryLocked(k, gen)
	if e == nil {
		e = &cacheEntry{key: k, gen: gen}
		c.byKey[k] = c.ll.PushFront(e)
	}
	if e.parsed == nil {
		e.parsed = map[string]parsed{}
	}
	if old, ok := e.parsed[kind]; ok {
		e.size -= old.size
		c.used -= old.size
	}
	e.parsed[kind] = parsed{v, size}
	e.size += size
	c.used += size
	c.evictLocked()
}

// Invalidate drops what is kept of k.
func (c *Cache) Invalidate(k CacheKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[k]; ok {
		c.stats.Invalidations++
		c.removeLocked(el)
	}
}

func (c *Cache) evictLocked() {
	for c.used > c.limit && c.ll.Len() > 0 {
		c.stats.Evictions++
		c.removeLocked(c.ll.Back())
	}
}

func (c *Cache) removeLocked(el *list.Element) {
	e := el.Value.(*cacheEntry)
	c.ll.Remove(el)
	delete(c.byKey, e.key)
	c.used -= e.size
}
