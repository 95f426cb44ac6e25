package emulator

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// listCursor is the real API's cursor: base64 of {"sortValue","id"}.
type listCursor struct {
	SortValue string `json:"sortValue"`
	ID        string `json:"id"`
}

// multi returns a repeated query parameter in either qs form (a=x&a=y or a[]=x).
func multi(q url.Values, key string) []string {
	return append(append([]string{}, q[key]...), q[key+"[]"]...)
}

// handleList serves GET /sandbox: filters, sort, and cursor pages ending with
// nextCursor null. `states` matches the stored state, as the real TypeORM
// adapter does.
func (s *Server) handleList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	bad := func(msg string) { s.apiError(w, r, http.StatusBadRequest, msg) }

	limit := 100
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		switch {
		case err != nil:
			bad("limit must be an integer number")
			return
		case n < 1:
			bad("limit must not be less than 1")
			return
		case n > 200:
			bad("limit must not be greater than 200")
			return
		}
		limit = n
	}
	var wantLabels map[string]string
	if v := q.Get("labels"); v != "" {
		if err := json.Unmarshal([]byte(v), &wantLabels); err != nil {
			bad("Invalid labels JSON format")
			return
		}
	}
	states := map[string]bool{}
	for _, st := range multi(q, "states") {
		if !validListStates[st] {
			bad(fmt.Sprintf("each value in states must be one of the following values: %s", strings.Join(sortedKeys(validListStates), ", ")))
			return
		}
		states[st] = true
	}
	var cur *listCursor
	if v := q.Get("cursor"); v != "" {
		raw, err := base64.StdEncoding.DecodeString(v)
		var c listCursor
		if err != nil || json.Unmarshal(raw, &c) != nil || c.ID == "" {
			bad("Invalid cursor provided")
			return
		}
		cur = &c
	}
	sortField := q.Get("sort")
	if sortField == "" {
		sortField = "lastActivityAt"
	}
	switch sortField {
	case "name", "cpu", "memoryGib", "diskGib", "lastActivityAt", "createdAt":
	default:
		bad("sort must be one of the following values: name, cpu, memoryGib, diskGib, lastActivityAt, createdAt")
		return
	}
	desc := true
	switch q.Get("order") {
	case "", "desc":
	case "asc":
		desc = false
	default:
		bad("order must be one of the following values: asc, desc")
		return
	}
	nums := map[string]int{}
	for _, k := range []string{"minCpu", "maxCpu", "minMemoryGiB", "maxMemoryGiB", "minDiskGiB", "maxDiskGiB", "minGpu", "maxGpu"} {
		if v := q.Get(k); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				bad(k + " must be an integer number")
				return
			}
			nums[k] = n
		}
	}
	times := map[string]time.Time{}
	for _, k := range []string{"createdAtAfter", "createdAtBefore", "lastEventAfter", "lastEventBefore", "autoDestroyAtAfter", "autoDestroyAtBefore"} {
		if v := q.Get(k); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				bad(k + " must be a valid ISO 8601 date string")
				return
			}
			times[k] = t
		}
	}

	type row struct {
		key  string
		id   string
		item sandboxListItemJSON
	}
	base := baseURL(r)
	s.mu.Lock()
	var rows []row
	for _, sb := range s.sandboxes {
		if sb.removed || !matchList(sb, q, wantLabels, states, nums, times) {
			continue
		}
		rows = append(rows, row{key: sortKey(sb, sortField), id: sb.id, item: s.listItemLocked(sb, base)})
	}
	s.mu.Unlock()

	less := func(ak, aid, bk, bid string) bool {
		if ak != bk {
			return (ak < bk) != desc
		}
		if aid == bid {
			return false
		}
		return (aid < bid) != desc
	}
	sort.Slice(rows, func(i, j int) bool { return less(rows[i].key, rows[i].id, rows[j].key, rows[j].id) })
	if cur != nil {
		i := sort.Search(len(rows), func(i int) bool { return less(cur.SortValue, cur.ID, rows[i].key, rows[i].id) })
		rows = rows[i:]
	}
	out := listSandboxesJSON{Items: []sandboxListItemJSON{}}
	for i, rw := range rows {
		if i == limit {
			last := rows[i-1]
			b, _ := json.Marshal(listCursor{SortValue: last.key, ID: last.id})
			c := base64.StdEncoding.EncodeToString(b)
			out.NextCursor = &c
			break
		}
		out.Items = append(out.Items, rw.item)
	}
	writeJSON(w, http.StatusOK, out)
}

func matchList(sb *sandbox, q url.Values, labels map[string]string, states map[string]bool, nums map[string]int, times map[string]time.Time) bool {
	if v := q.Get("id"); v != "" && !strings.HasPrefix(strings.ToLower(sb.id), strings.ToLower(v)) {
		return false
	}
	if v := q.Get("name"); v != "" && !strings.HasPrefix(strings.ToLower(sb.name), strings.ToLower(v)) {
		return false
	}
	for k, v := range labels {
		if got, ok := sb.labels[k]; !ok || got != v {
			return false
		}
	}
	if len(states) > 0 && !states[sb.state] {
		return false
	}
	if sn := multi(q, "snapshots"); len(sn) > 0 && !contains(sn, sb.snapshotName) {
		return false
	}
	if rg := multi(q, "regionIds"); len(rg) > 0 && !contains(rg, sb.target) {
		return false
	}
	if sc := multi(q, "sandboxClasses"); len(sc) > 0 && !contains(sc, sandboxClass) {
		return false
	}
	bounds := []struct {
		key string
		val int
		min bool
	}{
		{"minCpu", sb.cpu, true}, {"maxCpu", sb.cpu, false}, {"minMemoryGiB", sb.memory, true}, {"maxMemoryGiB", sb.memory, false},
		{"minDiskGiB", sb.disk, true}, {"maxDiskGiB", sb.disk, false}, {"minGpu", sb.gpu, true}, {"maxGpu", sb.gpu, false},
	}
	for _, b := range bounds {
		if n, ok := nums[b.key]; ok && ((b.min && b.val < n) || (!b.min && b.val > n)) {
			return false
		}
	}
	if v := q.Get("isPublic"); v != "" && strconv.FormatBool(sb.public) != v {
		return false
	}
	if v := q.Get("isRecoverable"); v != "" && strconv.FormatBool(sb.recoverable) != v {
		return false
	}
	for k, t := range times {
		var at time.Time
		switch {
		case strings.HasPrefix(k, "createdAt"):
			at = sb.createdAt
		case strings.HasPrefix(k, "lastEvent"):
			at = sb.updatedAt
		default:
			if sb.autoDestroyAt == nil {
				return false
			}
			at = *sb.autoDestroyAt
		}
		if (strings.HasSuffix(k, "After") && !at.After(t)) || (strings.HasSuffix(k, "Before") && !at.Before(t)) {
			return false
		}
	}
	return true
}

// sortKey renders the sort field so that string order equals value order.
func sortKey(sb *sandbox, field string) string {
	switch field {
	case "name":
		return sb.name
	case "cpu":
		return fmt.Sprintf("%012d", sb.cpu)
	case "memoryGib":
		return fmt.Sprintf("%012d", sb.memory)
	case "diskGib":
		return fmt.Sprintf("%012d", sb.disk)
	case "createdAt":
		return fmt.Sprintf("%020d", sb.createdAt.UnixNano())
	default:
		return fmt.Sprintf("%020d", sb.lastActivityAt.UnixNano())
	}
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
