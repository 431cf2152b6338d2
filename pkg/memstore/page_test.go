package memstore

import (
	"encoding/base64"
	"fmt"
	"maps"
	"math/rand"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/courier-dev/courier/pkg/apis/courier"
)

// listAll follows continue tokens to the end and returns the pages.
func listAll(t *testing.T, s *Store[*dcp], ns string, match func(*dcp) bool, opts PageOptions, between func()) []Page[*dcp] {
	t.Helper()
	var pages []Page[*dcp]
	for {
		p, err := s.ListPage(ns, match, opts)
		if err != nil {
			t.Fatalf("page %d: %v", len(pages)+1, err)
		}
		pages = append(pages, p)
		if p.Continue == "" {
			return pages
		}
		if opts.Limit > 0 && int64(len(p.Items)) != opts.Limit {
			t.Fatalf("page %d has %d items and a continue token, want %d", len(pages), len(p.Items), opts.Limit)
		}
		opts.Continue, opts.ResourceVersion = p.Continue, ""
		if between != nil {
			between()
		}
	}
}

func pageNames(pages []Page[*dcp]) [][]string {
	var out [][]string
	for _, p := range pages {
		var names []string
		for _, it := range p.Items {
			names = append(names, it.Namespace+"/"+it.Name)
		}
		out = append(out, names)
	}
	return out
}

func TestListPage(t *testing.T) {
	s, _ := newTestStore()
	s.Upsert(obj("b", "x", "Synced"), obj("a", "y", "Pending"), obj("a", "x", "Synced"), obj("c", "x", "Pending"), obj("b", "y", "Synced"))
	synced := func(o *dcp) bool { return o.Status.Phase == "Synced" }
	tcs := []struct {
		name      string
		namespace string
		match     func(*dcp) bool
		limit     int64
		want      [][]string
		remaining []int64 // RemainingItemCount of each page, -1 for none
	}{
		{name: "no limit", want: [][]string{{"a/x", "a/y", "b/x", "b/y", "c/x"}}, remaining: []int64{-1}},
		{name: "limit larger than the list", limit: 10, want: [][]string{{"a/x", "a/y", "b/x", "b/y", "c/x"}}, remaining: []int64{-1}},
		{name: "limit equal to the list: no empty last page", limit: 5, want: [][]string{{"a/x", "a/y", "b/x", "b/y", "c/x"}}, remaining: []int64{-1}},
		{name: "pages of 2", limit: 2, want: [][]string{{"a/x", "a/y"}, {"b/x", "b/y"}, {"c/x"}}, remaining: []int64{3, 1, -1}},
		{name: "pages of 1 in one namespace", namespace: "b", limit: 1, want: [][]string{{"b/x"}, {"b/y"}}, remaining: []int64{1, -1}},
		{name: "a namespace without objects", namespace: "bb", limit: 1, want: [][]string{nil}, remaining: []int64{-1}},
		{
			name: "the limit counts matching objects; no count with a selector", match: synced, limit: 1,
			want: [][]string{{"a/x"}, {"b/x"}, {"b/y"}}, remaining: []int64{-1, -1, -1},
		},
		{
			name: "no next page when nothing further matches", match: synced, limit: 3,
			want: [][]string{{"a/x", "b/x", "b/y"}}, remaining: []int64{-1},
		},
		{
			name: "namespace and selector", namespace: "a", match: synced, limit: 1,
			want: [][]string{{"a/x"}}, remaining: []int64{-1},
		},
	}
	for _, tc := range tcs {
		t.Run(tc.name, func(t *testing.T) {
			pages := listAll(t, s, tc.namespace, tc.match, PageOptions{Limit: tc.limit}, nil)
			if got := pageNames(pages); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("pages = %v, want %v", got, tc.want)
			}
			for i, p := range pages {
				got := int64(-1)
				if p.RemainingItemCount != nil {
					got = *p.RemainingItemCount
				}
				if i < len(tc.remaining) && got != tc.remaining[i] {
					t.Errorf("page %d: remainingItemCount %d, want %d (-1: none)", i+1, got, tc.remaining[i])
				}
				if p.ResourceVersion != rv(5) {
					t.Errorf("page %d: resourceVersion %s, want %s", i+1, p.ResourceVersion, rv(5))
				}
			}
		})
	}
}

// TestListPagesOf10000 pages through 10,000 rows with several page sizes,
// with and without a selector, while another goroutine changes, deletes and
// adds rows: the pages hold every row of the first page's state exactly
// once, as it was then.
func TestListPagesOf10000(t *testing.T) {
	const n = 10000
	even := func(o *dcp) bool { i, _ := strconv.Atoi(o.Name[3:8]); return i%2 == 0 }
	for _, size := range []int64{1, 7, 500, 10000} {
		for _, sel := range []struct {
			name  string
			match func(*dcp) bool
			want  int
		}{{"all", nil, n}, {"even rows", even, n / 2}} {
			t.Run(fmt.Sprintf("limit %d, %s", size, sel.name), func(t *testing.T) {
				s, _ := newTestStore()
				s.Upsert(rows(n)...)
				seed, seedRV := s.List("", nil)
				want := map[string]string{}
				for _, o := range seed {
					if sel.match == nil || sel.match(o) {
						want[o.Namespace+"/"+o.Name] = o.ResourceVersion
					}
				}

				// After the first page, another goroutine changes rows
				// until the last one.
				stop := make(chan struct{})
				var wg sync.WaitGroup
				var start sync.Once
				writer := func() {
					defer wg.Done()
					r := rand.New(rand.NewSource(size))
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						o := obj(fmt.Sprintf("ws%03d", r.Intn(100)), fmt.Sprintf("row%05d", r.Intn(n)), "Synced")
						switch i % 3 {
						case 0:
							o.Status.Message = fmt.Sprint(i)
							s.Upsert(o)
						case 1:
							s.Delete(KeyOf(o))
						case 2:
							o.Name += "-new" // sorts between the seeded rows
							s.Upsert(o)
						}
						time.Sleep(50 * time.Microsecond)
					}
				}
				page := 0
				pages := listAll(t, s, "", sel.match, PageOptions{Limit: size}, func() {
					start.Do(func() { wg.Add(1); go writer() })
					// And for certain, between every two pages: one
					// row changes and another is deleted.
					page++
					i := (page * int(size)) % n
					s.Upsert(obj(fmt.Sprintf("ws%03d", i%100), fmt.Sprintf("row%05d", i), "Synced", withMessage("between")))
					s.Delete(Key{Namespace: fmt.Sprintf("ws%03d", (i+1)%100), Name: fmt.Sprintf("row%05d", (i+1)%n)})
				})
				close(stop)
				wg.Wait()

				got := map[string]string{}
				var last string
				for i, p := range pages {
					if p.ResourceVersion != seedRV {
						t.Fatalf("page %d: resourceVersion %s, want the first page's %s", i+1, p.ResourceVersion, seedRV)
					}
					for _, it := range p.Items {
						k := it.Namespace + "/" + it.Name
						if _, dup := got[k]; dup {
							t.Fatalf("%s on two pages", k)
						}
						if k <= last {
							t.Fatalf("%s after %s: not in order", k, last)
						}
						last = k
						if it.Status.Message != "" {
							t.Fatalf("%s changed after the first page: message %q", k, it.Status.Message)
						}
						got[k] = it.ResourceVersion
					}
					if sel.match == nil && p.Continue != "" {
						if rem := p.RemainingItemCount; rem == nil || int(*rem) != n-len(got) {
							t.Fatalf("page %d: remainingItemCount %v, want %d", i+1, rem, n-len(got))
						}
					}
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("pages hold %d rows, want the %d of the first page's state", len(got), len(want))
				}
				if wantPages := (sel.want + int(size) - 1) / int(size); len(pages) != wantPages {
					t.Errorf("%d pages, want %d", len(pages), wantPages)
				}
			})
		}
	}
}

func TestListPageErrors(t *testing.T) {
	token := func(json string) string { return base64.RawURLEncoding.EncodeToString([]byte(json)) }
	s, clock := newTestStore(WithHistorySize(2), WithListSnapshots(2, time.Minute))
	s.Upsert(rows(10)...)
	first, err := s.ListPage("", nil, PageOptions{Limit: 3})
	if err != nil || first.Continue == "" {
		t.Fatalf("first page: %v, continue %q", err, first.Continue)
	}

	isGone := func(err error) bool {
		return apierrors.IsResourceExpired(err) && strings.Contains(err.Error(), "The provided continue parameter is too old")
	}
	tcs := []struct {
		name      string
		namespace string
		opts      PageOptions
		wantErr   func(error) bool
	}{
		{name: "not base64", opts: PageOptions{Continue: "%%%"}, wantErr: apierrors.IsBadRequest},
		{name: "not JSON", opts: PageOptions{Continue: token("rv=5")}, wantErr: apierrors.IsBadRequest},
		{name: "another format", opts: PageOptions{Continue: token(`{"v":"meta.k8s.io/v1","rv":105,"start":"ws000/row00000"}`)}, wantErr: apierrors.IsBadRequest},
		{name: "no resource version", opts: PageOptions{Continue: token(`{"v":"memstore.courier.dev/v1","ns":"ws000","name":"row00000"}`)}, wantErr: apierrors.IsBadRequest},
		{name: "no name", opts: PageOptions{Continue: token(`{"v":"memstore.courier.dev/v1","rv":110}`)}, wantErr: apierrors.IsBadRequest},
		{name: "a token of another namespace", namespace: "ws005", opts: PageOptions{Continue: first.Continue}, wantErr: apierrors.IsBadRequest},
		{name: "a resource version with a token", opts: PageOptions{Continue: first.Continue, ResourceVersion: rv(10)}, wantErr: apierrors.IsBadRequest},
		{name: "a resource version that is not a number", opts: PageOptions{ResourceVersion: "x"}, wantErr: apierrors.IsBadRequest},
		{name: "a token from before this store", opts: PageOptions{Continue: token(`{"v":"memstore.courier.dev/v1","rv":7,"ns":"ws000","name":"row00000"}`)}, wantErr: isGone},
		{name: "a token from the future", opts: PageOptions{Continue: token(`{"v":"memstore.courier.dev/v1","rv":9999,"ns":"ws000","name":"row00000"}`)}, wantErr: isGone},
		{name: "a resource version older than the history", opts: PageOptions{ResourceVersion: rv(1), Limit: 1}, wantErr: apierrors.IsResourceExpired},
	}
	for _, tc := range tcs {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.ListPage(tc.namespace, nil, tc.opts)
			if err == nil || !tc.wantErr(err) {
				t.Errorf("error = %v, want a different one", err)
			}
		})
	}

	t.Run("a kept snapshot outlives the history", func(t *testing.T) {
		s.Upsert(rows(10, withMessage("later"))...) // the history now holds 2 of 10 changes
		p, err := s.ListPage("", nil, PageOptions{Continue: first.Continue, Limit: 3})
		if err != nil || p.ResourceVersion != rv(10) || p.Items[0].Name != "row00003" || p.Items[0].Status.Message != "" {
			t.Fatalf("second page: %v, %v", err, pageNames([]Page[*dcp]{p}))
		}
	})
	t.Run("an expired snapshot is gone", func(t *testing.T) {
		clock.Set(t0.Add(time.Minute))
		_, err := s.ListPage("", nil, PageOptions{Continue: first.Continue, Limit: 3})
		if !isGone(err) {
			t.Fatalf("error = %v, want 410 Expired: too old", err)
		}
		if status := err.(apierrors.APIStatus).Status(); status.Reason != metav1.StatusReasonExpired || status.Code != 410 {
			t.Errorf("status %+v, want 410 Expired", status)
		}
	})
	t.Run("the oldest snapshot makes room", func(t *testing.T) {
		var tokens []string
		for i := 0; i < 3; i++ {
			s.Upsert(obj("ws000", "row00000", "Synced", withMessage(fmt.Sprint(i))))
			p, err := s.ListPage("", nil, PageOptions{Limit: 3})
			if err != nil {
				t.Fatal(err)
			}
			tokens = append(tokens, p.Continue)
			s.Upsert(rows(5, withMessage(fmt.Sprint("x", i)))...) // out of the history
		}
		if _, err := s.ListPage("", nil, PageOptions{Continue: tokens[0]}); !isGone(err) {
			t.Errorf("first of three snapshots, two kept: error %v, want 410 Expired", err)
		}
		for _, tok := range tokens[1:] {
			if _, err := s.ListPage("", nil, PageOptions{Continue: tok}); err != nil {
				t.Errorf("a kept snapshot: %v", err)
			}
		}
	})
}

// TestListPageFromHistory: a paged list at an exact resource version, and a
// token whose snapshot was not kept, are rebuilt from the history.
func TestListPageFromHistory(t *testing.T) {
	s, _ := newTestStore(WithListSnapshots(0, time.Minute))
	s.Upsert(rows(10)...)
	then, thenRV := s.List("", nil)
	s.Delete(KeyOf(then[0]), KeyOf(then[5]))
	s.Upsert(rows(10, withMessage("later"))...)
	s.Upsert(obj("ws000", "row00000-new", "Synced"))

	pages := listAll(t, s, "", nil, PageOptions{Limit: 3, ResourceVersion: thenRV}, func() {
		s.Upsert(obj("ws000", "row00001", "Kept"))
	})
	var got []*dcp
	for _, p := range pages {
		if p.ResourceVersion != thenRV {
			t.Errorf("resourceVersion %s, want %s", p.ResourceVersion, thenRV)
		}
		got = append(got, p.Items...)
	}
	if !reflect.DeepEqual(got, then) {
		t.Errorf("pages at %s:\n%v\nwant what List returned then:\n%v", thenRV, pageNames(pages), then)
	}
}

// TestListAfterChanges checks that the sorted order the store keeps follows
// additions, deletions and re-additions, including many at once.
func TestListAfterChanges(t *testing.T) {
	s, _ := newTestStore()
	want := map[Key]bool{}
	check := func(step string) {
		t.Helper()
		items, _ := s.List("", nil)
		var keys []Key
		for _, it := range items {
			keys = append(keys, KeyOf(it))
		}
		wantKeys := slices.SortedFunc(maps.Keys(want), compareKeys)
		if !slices.Equal(keys, wantKeys) {
			t.Fatalf("%s: List = %v, want %v", step, keys, wantKeys)
		}
	}
	r := rand.New(rand.NewSource(1))
	for step := 0; step < 200; step++ {
		for i := 0; i < r.Intn(20); i++ {
			o := obj(fmt.Sprint("ns", r.Intn(3)), fmt.Sprint("o", r.Intn(50)), courier.CopyPhase(fmt.Sprint("P", r.Intn(2))))
			if r.Intn(3) == 0 {
				s.Delete(KeyOf(o))
				delete(want, KeyOf(o))
			} else {
				s.Upsert(o)
				want[KeyOf(o)] = true
			}
		}
		if step%7 == 0 {
			check(fmt.Sprint("step ", step))
		}
	}
	check("after the random steps")
	s.Upsert(rows(3000)...)
	for _, o := range rows(3000) {
		want[KeyOf(o)] = true
	}
	// More additions since the last list than objects held: the order is
	// rebuilt from scratch.
	for _, o := range rows(3000) {
		s.Delete(KeyOf(o))
		delete(want, KeyOf(o))
	}
	s.Upsert(rows(3000, withMessage("again"))...)
	for _, o := range rows(3000) {
		want[KeyOf(o)] = true
	}
	s.mu.RLock()
	rebuild := s.orderRebuild
	s.mu.RUnlock()
	if !rebuild {
		t.Error("6,000 additions since the last list: the order is not rebuilt from scratch")
	}
	check("after deleting and adding 3,000 again")
	s.Replace(rows(5))
	want = map[Key]bool{}
	for _, o := range rows(5) {
		want[KeyOf(o)] = true
	}
	check("after Replace")
}

// A page shares the store's objects (no copy per item), and the store never
// modifies an object it holds: a later change stores a new object, and the
// page keeps what it listed.
func TestListPageSharesStoredObjects(t *testing.T) {
	s, _ := newTestStore()
	s.Upsert(rows(3)...)
	p, err := s.ListPage("", nil, PageOptions{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	p2, _ := s.ListPage("", nil, PageOptions{Limit: 2})
	if p2.Items[0] != p.Items[0] {
		t.Error("two pages of one state hold different objects: the items were copied")
	}
	changed := p.Items[0].DeepCopy()
	changed.Status.Phase = "Forbidden"
	s.Upsert(changed)
	if p.Items[0].Status.Phase != "Synced" {
		t.Errorf("a change modified an object already listed: phase %q", p.Items[0].Status.Phase)
	}
	p3, _ := s.ListPage("", nil, PageOptions{Limit: 2})
	if p3.Items[0].Status.Phase != "Forbidden" {
		t.Errorf("positive control: the new state lists phase %q, want Forbidden", p3.Items[0].Status.Phase)
	}
}
