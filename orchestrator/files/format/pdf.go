package format

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/pdfcpu/pdfcpu/pkg/api"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/form"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/model"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/types"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/files"
)

// PDFs with github.com/pdfcpu/pdfcpu: the one pure-Go PDF library that
// both reads (relaxed validation of real-world files) and edits (pages,
// merge, split, forms); it has no text extraction, so pdftext.go reads
// the text operators of its decoded content streams.

var disableConfigDir sync.Once

// pdfConf is pdfcpu's configuration: relaxed validation, and never a
// configuration directory of its own in the server's home.
func pdfConf() *model.Configuration {
	disableConfigDir.Do(api.DisableConfigDir)
	conf := model.NewDefaultConfiguration()
	conf.ValidationMode = model.ValidationRelaxed
	return conf
}

// pdfDoc is a parsed PDF as the cache keeps it.
type pdfDoc struct {
	info PDFInfo
	mu   sync.Mutex // guards ctx and texts (pdfcpu's reads fill caches)
	ctx  *model.Context
	// texts are the pages' texts extracted so far (1-based).
	texts map[int]pageTextResult
}

type pageTextResult struct {
	text string
	cut  bool
}

// PDFInfo is what pdf_info says of a PDF.
type PDFInfo struct {
	ID        string    `json:"id"`
	Pages     int       `json:"pages"`
	PageSizes []PageDim `json:"page_sizes" jsonschema_description:"each page's width and height in points (1/72 inch), in order"`
	Title     string    `json:"title,omitempty"`
	Author    string    `json:"author,omitempty"`
	Subject   string    `json:"subject,omitempty"`
	Creator   string    `json:"creator,omitempty"`
	Producer  string    `json:"producer,omitempty"`
	Version   string    `json:"version"`
	HasForm   bool      `json:"has_form" jsonschema_description:"it has fillable form fields (pdf_get_form_fields lists them)"`
	Encrypted bool      `json:"encrypted"`
	Hash      string    `json:"hash" jsonschema_description:"the file's sha256: pass it as if_match to an edit"`
}

// PageDim is a page's size in points.
type PageDim struct {
	Width  float64 `json:"width"`
	Height float64 `json:"height"`
}

// doc returns the parsed PDF of src, from the cache when it is current.
func (t *tier) doc(ctx context.Context, src source) (*pdfDoc, error) {
	v, err := t.s.Cache().Parsed(src.key, src.info.Gen, "pdf", func() (any, int64, error) {
		d, err := guard(ctx, func() (*pdfDoc, error) { return parsePDF(src.data) })
		if err != nil {
			return nil, 0, malformed(src.path, "PDF", err)
		}
		d.info.Hash = src.info.Hash
		return d, int64(len(src.data))*3 + 4096, nil
	})
	if err != nil {
		return nil, err
	}
	d := v.(*pdfDoc)
	return d, nil
}

// parsePDF reads data as a PDF.
func parsePDF(data []byte) (*pdfDoc, error) {
	if !bytes.HasPrefix(bytes.TrimLeft(data[:min(len(data), 1024)], "\x00\t\n\r "), []byte("%PDF-")) {
		return nil, errors.New("it does not start with %PDF-")
	}
	ctx, err := api.ReadAndValidate(bytes.NewReader(data), pdfConf())
	if err != nil {
		return nil, err
	}
	if ctx.PageCount > MaxPages {
		return nil, orchestrator.Errorf(orchestrator.EInvalid, "it has %d pages; the format tools read at most %d", ctx.PageCount, MaxPages)
	}
	d := &pdfDoc{ctx: ctx, texts: map[int]pageTextResult{}}
	d.info.Pages = ctx.PageCount
	d.info.Version = ctx.HeaderVersion.String()
	if ctx.RootVersion != nil {
		d.info.Version = ctx.RootVersion.String()
	}
	d.info.Title, d.info.Author, d.info.Subject = ctx.Title, ctx.Author, ctx.Subject
	d.info.Creator, d.info.Producer = ctx.Creator, ctx.Producer
	d.info.Encrypted = ctx.Encrypt != nil
	d.info.HasForm = ctx.Form != nil
	dims, err := ctx.PageDims()
	if err != nil {
		return nil, err
	}
	d.info.PageSizes = make([]PageDim, len(dims))
	for i, dm := range dims {
		d.info.PageSizes[i] = PageDim{round2(dm.Width), round2(dm.Height)}
	}
	return d, nil
}

func round2(f float64) float64 { return float64(int64(f*100+0.5)) / 100 }

// Info returns pdf_info of src.
func (t *tier) pdfInfo(ctx context.Context, src source) (PDFInfo, error) {
	d, err := t.doc(ctx, src)
	if err != nil {
		return PDFInfo{}, err
	}
	out := d.info
	out.ID = src.path
	return out, nil
}

// PageText is the text of one page.
type PageText struct {
	Page int    `json:"page" jsonschema_description:"1-based"`
	Text string `json:"text"`
}

// PDFText is pdf_extract_text's answer.
type PDFText struct {
	ID         string     `json:"id"`
	TotalPages int        `json:"total_pages"`
	Pages      []PageText `json:"pages"`
	Truncated  bool       `json:"truncated,omitempty" jsonschema_description:"the text was cut at the size limit (512 KiB per call) or the page limit (200): ask for the pages after the last one returned"`
	Hash       string     `json:"hash"`
}

func (r PDFText) AuditSummary() any {
	n := 0
	for _, p := range r.Pages {
		n += len(p.Text)
	}
	return map[string]any{"pages": len(r.Pages), "bytes": n, "truncated": r.Truncated}
}

// extractText returns the text of pages (1-based; none: every page, up
// to MaxTextPages), at most MaxText bytes in all.
func (t *tier) extractText(ctx context.Context, src source, pages []int) (PDFText, error) {
	d, err := t.doc(ctx, src)
	if err != nil {
		return PDFText{}, err
	}
	n := d.info.Pages
	out := PDFText{ID: src.path, TotalPages: n, Pages: []PageText{}, Hash: src.info.Hash}
	if len(pages) == 0 {
		for p := 1; p <= n; p++ {
			pages = append(pages, p)
		}
	}
	for _, p := range pages {
		if p < 1 || p > n {
			return PDFText{}, orchestrator.FieldErrorf("pages", "page %d is not within %s (%d pages)", p, src.path, n)
		}
	}
	if len(pages) > MaxTextPages {
		pages, out.Truncated = pages[:MaxTextPages], true
	}
	budget := MaxText
	for _, p := range pages {
		if budget <= 0 {
			out.Truncated = true
			break
		}
		r, err := guard(ctx, func() (pageTextResult, error) { return d.pageText(p) })
		if err != nil {
			return PDFText{}, malformed(src.path, "PDF", fmt.Errorf("page %d: %w", p, err))
		}
		text := r.text
		if len(text) > budget {
			text, out.Truncated = strings.ToValidUTF8(text[:budget], ""), true
		}
		out.Truncated = out.Truncated || r.cut
		budget -= len(text)
		out.Pages = append(out.Pages, PageText{Page: p, Text: text})
	}
	return out, nil
}

// pageText extracts page p's text once.
func (d *pdfDoc) pageText(p int) (pageTextResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if r, ok := d.texts[p]; ok {
		return r, nil
	}
	r, err := pdfcpu.ExtractPageContent(d.ctx, p)
	if err != nil {
		return pageTextResult{}, err
	}
	content, err := io.ReadAll(io.LimitReader(r, 64<<20))
	if err != nil {
		return pageTextResult{}, err
	}
	rd := d.resources(p)
	text, cut := pageTextWith(content, d.fontsOf(rd), MaxText, d.forms(rd, 0), 0)
	res := pageTextResult{strings.ToValidUTF8(text, ""), cut}
	d.texts[p] = res
	return res, nil
}

// rgbHex is a #RRGGBB colour.
var rgbHex = regexp.MustCompile(`^#[0-9A-Fa-f]{6}$`)

// pdfPage reads the PDF id for an edit of its page (which must exist) and
// where the result goes.
func (t *tier) pdfPage(ctx context.Context, c files.Caller, id, out string, page int) (src source, dst string, derived bool, pages int, err error) {
	src, err = t.read(ctx, c, "id", id)
	if err != nil {
		return source{}, "", false, 0, err
	}
	d, err := t.doc(ctx, src)
	if err != nil {
		return source{}, "", false, 0, err
	}
	if err := pageArg("page", page, d.info.Pages); err != nil {
		return source{}, "", false, 0, err
	}
	dst, derived, err = output("output", out, src.path)
	return src, dst, derived, d.info.Pages, err
}

// resources is page p's resource dictionary (its own, else inherited).
func (d *pdfDoc) resources(p int) types.Dict {
	pd, _, inh, err := d.ctx.PageDict(p, false)
	if err != nil {
		return nil
	}
	var res types.Dict
	if o, ok := pd.Find("Resources"); ok {
		res, _ = d.ctx.DereferenceDict(o)
	}
	if res == nil && inh != nil {
		res = inh.Resources
	}
	return res
}

// maxFormDepth bounds form XObjects drawn inside form XObjects.
const maxFormDepth = 4

// forms finds the content and fonts of the form XObjects of res (a stamp
// such as pdf_add_text's is one), for the text of a page that draws them.
func (d *pdfDoc) forms(res types.Dict, depth int) formsFunc {
	return func(name string) ([]byte, map[string]decoder, formsFunc, bool) {
		if res == nil || depth >= maxFormDepth {
			return nil, nil, nil, false
		}
		xo, ok := res.Find("XObject")
		if !ok {
			return nil, nil, nil, false
		}
		xd, err := d.ctx.DereferenceDict(xo)
		if err != nil || xd == nil {
			return nil, nil, nil, false
		}
		o, ok := xd.Find(name)
		if !ok {
			return nil, nil, nil, false
		}
		sd, _, err := d.ctx.DereferenceStreamDict(o)
		if err != nil || sd == nil {
			return nil, nil, nil, false
		}
		if st := sd.Dict.NameEntry("Subtype"); st == nil || *st != "Form" {
			return nil, nil, nil, false
		}
		if sd.Decode() != nil || len(sd.Content) > 16<<20 {
			return nil, nil, nil, false
		}
		var fres types.Dict
		if ro, ok := sd.Dict.Find("Resources"); ok {
			fres, _ = d.ctx.DereferenceDict(ro)
		}
		if fres == nil {
			fres = res // a form without resources uses its page's
		}
		return sd.Content, d.fontsOf(fres), d.forms(fres, depth+1), true
	}
}

// fontsOf returns the decoders of the fonts of res that have a ToUnicode
// map (the others are shown as WinAnsi).
func (d *pdfDoc) fontsOf(res types.Dict) map[string]decoder {
	if res == nil {
		return nil
	}
	fo, ok := res.Find("Font")
	if !ok {
		return nil
	}
	fd, err := d.ctx.DereferenceDict(fo)
	if err != nil || fd == nil {
		return nil
	}
	out := map[string]decoder{}
	for name, o := range fd {
		font, err := d.ctx.DereferenceDict(o)
		if err != nil || font == nil {
			continue
		}
		tuo, ok := font.Find("ToUnicode")
		if !ok {
			if st := font.NameEntry("Subtype"); st != nil && *st == "Type0" {
				out[name] = func(string) string { return "" } // codes without a map: no text
			}
			continue
		}
		sd, _, err := d.ctx.DereferenceStreamDict(tuo)
		if err != nil || sd == nil || sd.Decode() != nil || len(sd.Content) > 4<<20 {
			continue
		}
		out[name] = parseToUnicode(sd.Content).decode
	}
	return out
}

// pdfEdit runs edit (pdfcpu's, from src's bytes to a writer) and writes
// its output to out (src itself: if the file is still what was read).
func (t *tier) pdfEdit(ctx context.Context, c files.Caller, src source, out string, derived bool, ifMatch string, edit func(rs io.ReadSeeker, w io.Writer, conf *model.Configuration) error) (Edited, error) {
	if err := src.checkIfMatch(ifMatch); err != nil {
		return Edited{}, err
	}
	if _, err := t.doc(ctx, src); err != nil { // a clear 422 first
		return Edited{}, err
	}
	b, err := guard(ctx, func() ([]byte, error) {
		var buf bytes.Buffer
		if err := edit(bytes.NewReader(src.data), &buf, pdfConf()); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	})
	if err != nil {
		return Edited{}, pdfOpError(src.path, err)
	}
	im := ""
	if out == src.path {
		im = src.info.Hash
	}
	return t.write(ctx, c, out, b, im, derived)
}

// pdfOpError is a failed pdfcpu edit: the caller's mistake (a page out of
// range, a field that does not exist) as a 422 with pdfcpu's words.
func pdfOpError(p string, err error) error {
	var oe *orchestrator.Error
	if errors.As(err, &oe) {
		return err
	}
	msg := err.Error()
	if len(msg) > 300 {
		msg = msg[:300] + "…"
	}
	return orchestrator.Errorf(orchestrator.EInvalid, "%s: %s", p, msg)
}

// pageRange checks a page of a document of n pages.
func pageArg(field string, p, n int) error {
	if p < 1 || p > n {
		return orchestrator.FieldErrorf(field, "page %d is not within the document's %d pages", p, n)
	}
	return nil
}

// Arguments of the PDF tools.
type (
	PDFTextArgs struct {
		FileID
		Pages []int `json:"pages,omitempty" jsonschema_description:"the pages to read (1-based); omit for every page (at most 200 per call)"`
	}
	PDFAddPageArgs struct {
		FileID
		AfterPage int    `json:"after_page,omitempty" jsonschema_description:"insert the blank page after this page (0 or omitted: at the end)"`
		Size      string `json:"size,omitempty" jsonschema_description:"paper size: A4, A3, A5, Letter, Legal, ... (omitted: the size of the page it follows)"`
		Landscape bool   `json:"landscape,omitempty"`
		IfMatch
	}
	PDFAddTextArgs struct {
		FileID
		Page   int     `json:"page" jsonschema_description:"the page (1-based)"`
		Text   string  `json:"text" jsonschema_description:"the text (lines split at \\n; at most 4096 bytes)"`
		X      float64 `json:"x,omitempty" jsonschema_description:"the text's left edge, in points (1/72 inch) from the page's left"`
		Y      float64 `json:"y,omitempty" jsonschema_description:"its bottom edge, in points from the page's bottom"`
		Size   int     `json:"size,omitempty" jsonschema_description:"font size in points (default 12, at most 200)"`
		Color  string  `json:"color,omitempty" jsonschema_description:"#RRGGBB (default #000000)"`
		Output string  `json:"output,omitempty" jsonschema_description:"write the result here (default: in place)"`
		IfMatch
	}
	PDFAddImageArgs struct {
		FileID
		Page   int     `json:"page" jsonschema_description:"the page (1-based)"`
		Image  string  `json:"image" jsonschema_description:"the image (PNG, JPEG, WebP, GIF) to place: its path in the workspace"`
		X      float64 `json:"x,omitempty" jsonschema_description:"the image's left edge, in points from the page's left"`
		Y      float64 `json:"y,omitempty" jsonschema_description:"its bottom edge, in points from the page's bottom"`
		Width  float64 `json:"width,omitempty" jsonschema_description:"its width in points (the height keeps the aspect; default: one point per pixel)"`
		Output string  `json:"output,omitempty" jsonschema_description:"write the result here (default: in place)"`
		IfMatch
	}
	PDFDeletePageArgs struct {
		FileID
		Page int `json:"page" jsonschema_description:"the page to delete (1-based)"`
		IfMatch
	}
	PDFMergeArgs struct {
		IDs    []string `json:"ids" jsonschema_description:"the PDFs to merge, in order (at most 50)"`
		Output string   `json:"output" jsonschema_description:"the path of the merged PDF (replaced if it exists)"`
	}
	PDFSplitArgs struct {
		FileID
		Ranges    []string `json:"ranges" jsonschema_description:"page ranges, one file each: \"1-3\", \"4\", \"5-\" (at most 100)"`
		OutputDir string   `json:"output_dir,omitempty" jsonschema_description:"where the parts go (default: beside the file), named <name>_<range>.pdf"`
	}
	PDFFillArgs struct {
		FileID
		Fields map[string]any `json:"fields" jsonschema_description:"values by field name (or id): text for a text field or date, true/false for a checkbox, an option for a radio group, combo or list box"`
		Output string         `json:"output,omitempty" jsonschema_description:"write the filled PDF here (default: fill it in place)"`
		IfMatch
	}
)

// FormField is a field of a PDF form.
type FormField struct {
	Name    string   `json:"name"`
	ID      string   `json:"id"`
	Type    string   `json:"type" jsonschema_description:"text, date, checkbox, radio, combobox, listbox"`
	Value   string   `json:"value"`
	Default string   `json:"default,omitempty"`
	Options []string `json:"options,omitempty"`
	Pages   []int    `json:"pages"`
	Locked  bool     `json:"locked,omitempty"`
}

// FormFields is pdf_get_form_fields' answer.
type FormFields struct {
	ID     string      `json:"id"`
	Fields []FormField `json:"fields"`
	Hash   string      `json:"hash"`
}

// SplitResult is pdf_split_pages' answer.
type SplitResult struct {
	Files []Edited `json:"files"`
}

func fieldType(ft fmt.Stringer) string {
	s := strings.ToLower(ft.String())
	switch {
	case strings.Contains(s, "check"):
		return "checkbox"
	case strings.Contains(s, "radio"):
		return "radio"
	case strings.Contains(s, "combo"):
		return "combobox"
	case strings.Contains(s, "list"):
		return "listbox"
	case strings.Contains(s, "date"):
		return "date"
	}
	return "text"
}

func (t *tier) pdfTools() []files.Tool {
	return []files.Tool{
		files.Define("pdf_info", "Facts of a PDF: page count, each page's size in points, title, author, whether it has a form, the hash.", true,
			func(ctx context.Context, c files.Caller, in FileID) (PDFInfo, error) {
				src, err := t.read(ctx, c, "id", in.ID)
				if err != nil {
					return PDFInfo{}, err
				}
				return t.pdfInfo(ctx, src)
			}).WithRoute("pdf_info"),
		files.Define("pdf_extract_text", "Extract the text of a PDF by page (all pages, or those listed). At most 200 pages and 512 KiB per call (truncated says so). Text drawn as images (scans) has no text.", true,
			func(ctx context.Context, c files.Caller, in PDFTextArgs) (PDFText, error) {
				src, err := t.read(ctx, c, "id", in.ID)
				if err != nil {
					return PDFText{}, err
				}
				return t.extractText(ctx, src, in.Pages)
			}).WithRoute("pdf_extract_text"),
		files.Define("pdf_add_page", "Insert a blank page into a PDF (after after_page, or at the end). With if_match, only if the file still has that hash.", false,
			func(ctx context.Context, c files.Caller, in PDFAddPageArgs) (Edited, error) {
				src, err := t.read(ctx, c, "id", in.ID)
				if err != nil {
					return Edited{}, err
				}
				d, err := t.doc(ctx, src)
				if err != nil {
					return Edited{}, err
				}
				after := in.AfterPage
				if after == 0 {
					after = d.info.Pages
				}
				if err := pageArg("after_page", after, d.info.Pages); err != nil {
					return Edited{}, err
				}
				var pc *pdfcpu.PageConfiguration
				if in.Size != "" {
					dim, ok := paperSize(in.Size)
					if !ok {
						return Edited{}, orchestrator.FieldErrorf("size", "unknown paper size %q: A0 to A8, Letter, Legal, Ledger, Tabloid, Executive", in.Size)
					}
					if in.Landscape {
						dim.Width, dim.Height = dim.Height, dim.Width
					}
					pc = &pdfcpu.PageConfiguration{PageDim: &dim, PageSize: in.Size, UserDim: true, InpUnit: types.POINTS}
				}
				return t.pdfEdit(ctx, c, src, src.path, false, in.IfMatch.IfMatch, func(rs io.ReadSeeker, w io.Writer, conf *model.Configuration) error {
					return api.InsertPages(rs, w, []string{strconv.Itoa(after)}, false, pc, conf)
				})
			}).WithRoute("pdf_add_page"),
		files.Define("pdf_add_text", "Write text on a page of a PDF at x, y (points from the bottom-left), in Helvetica of a size and colour. In place or into output. With if_match, only if the file still has that hash.", false,
			func(ctx context.Context, c files.Caller, in PDFAddTextArgs) (Edited, error) {
				switch {
				case strings.TrimSpace(in.Text) == "":
					return Edited{}, orchestrator.FieldErrorf("text", "text is required")
				case len(in.Text) > 4096:
					return Edited{}, orchestrator.FieldErrorf("text", "text is over 4096 bytes")
				case in.Size < 0 || in.Size > 200:
					return Edited{}, orchestrator.FieldErrorf("size", "size is 1 to 200 points")
				case in.Color != "" && !rgbHex.MatchString(in.Color):
					return Edited{}, orchestrator.FieldErrorf("color", "color is #RRGGBB, not %q", in.Color)
				}
				src, dst, derived, _, err := t.pdfPage(ctx, c, in.ID, in.Output, in.Page)
				if err != nil {
					return Edited{}, err
				}
				desc := fmt.Sprintf("position:bl, offset:%g %g, scalefactor:1 abs, rotation:0, fontname:Helvetica, points:%d, fillcolor:%s, opacity:1",
					in.X, in.Y, cmpOr(in.Size, 12), cmp.Or(in.Color, "#000000"))
				return t.pdfEdit(ctx, c, src, dst, derived, in.IfMatch.IfMatch, func(rs io.ReadSeeker, w io.Writer, conf *model.Configuration) error {
					wm, err := api.TextWatermark(in.Text, desc, true, false, types.POINTS)
					if err != nil {
						return orchestrator.FieldErrorf("text", "the text cannot be placed: %v", err)
					}
					return api.AddWatermarks(rs, w, []string{strconv.Itoa(in.Page)}, wm, conf)
				})
			}).WithRoute("pdf_add_text"),
		files.Define("pdf_add_image", "Place an image on a page of a PDF at x, y (points from the bottom-left), width points wide. In place or into output. With if_match, only if the file still has that hash.", false,
			func(ctx context.Context, c files.Caller, in PDFAddImageArgs) (Edited, error) {
				if in.Width < 0 {
					return Edited{}, orchestrator.FieldErrorf("width", "width is positive")
				}
				img, err := t.read(ctx, c, "image", in.Image)
				if err != nil {
					return Edited{}, err
				}
				cfg, _, err := imageHeader(img.path, img.data)
				if err != nil {
					return Edited{}, err
				}
				src, dst, derived, _, err := t.pdfPage(ctx, c, in.ID, in.Output, in.Page)
				if err != nil {
					return Edited{}, err
				}
				scale := 1.0
				if in.Width > 0 && cfg.Width > 0 {
					scale = in.Width / float64(cfg.Width)
				}
				desc := fmt.Sprintf("position:bl, offset:%g %g, scalefactor:%g abs, rotation:0, opacity:1", in.X, in.Y, scale)
				return t.pdfEdit(ctx, c, src, dst, derived, in.IfMatch.IfMatch, func(rs io.ReadSeeker, w io.Writer, conf *model.Configuration) error {
					wm, err := api.ImageWatermarkForReader(bytes.NewReader(img.data), desc, true, false, types.POINTS)
					if err != nil {
						return orchestrator.FieldErrorf("image", "%s cannot be placed: %v", img.path, err)
					}
					return api.AddWatermarks(rs, w, []string{strconv.Itoa(in.Page)}, wm, conf)
				})
			}).WithRoute("pdf_add_image"),
		files.Define("pdf_delete_page", "Delete a page of a PDF (not its only page). With if_match, only if the file still has that hash.", false,
			func(ctx context.Context, c files.Caller, in PDFDeletePageArgs) (Edited, error) {
				src, _, _, pages, err := t.pdfPage(ctx, c, in.ID, "", in.Page)
				if err != nil {
					return Edited{}, err
				}
				if pages == 1 {
					return Edited{}, orchestrator.FieldErrorf("page", "%s has one page: delete the file instead", src.path)
				}
				return t.pdfEdit(ctx, c, src, src.path, false, in.IfMatch.IfMatch, func(rs io.ReadSeeker, w io.Writer, conf *model.Configuration) error {
					return api.RemovePages(rs, w, []string{strconv.Itoa(in.Page)}, conf)
				})
			}).WithRoute("pdf_delete_page"),
		files.Define("pdf_merge", "Merge PDFs, in order, into a new file output (its source is derived).", false,
			func(ctx context.Context, c files.Caller, in PDFMergeArgs) (Edited, error) {
				switch {
				case len(in.IDs) < 2:
					return Edited{}, orchestrator.FieldErrorf("ids", "name at least two PDFs to merge")
				case len(in.IDs) > MaxMergeFiles:
					return Edited{}, orchestrator.FieldErrorf("ids", "at most %d PDFs per merge", MaxMergeFiles)
				}
				out, err := files.CleanID("output", in.Output)
				if err != nil {
					return Edited{}, err
				}
				var rs []io.ReadSeeker
				pages := 0
				for i, id := range in.IDs {
					src, err := t.read(ctx, c, fmt.Sprintf("ids[%d]", i), id)
					if err != nil {
						return Edited{}, err
					}
					d, err := t.doc(ctx, src)
					if err != nil {
						return Edited{}, err
					}
					if pages += d.info.Pages; pages > MaxPages {
						return Edited{}, orchestrator.FieldErrorf("ids", "the merged PDF would have more than %d pages", MaxPages)
					}
					rs = append(rs, bytes.NewReader(src.data))
				}
				b, err := guard(ctx, func() ([]byte, error) {
					var buf bytes.Buffer
					err := api.MergeRaw(rs, &buf, false, pdfConf())
					return buf.Bytes(), err
				})
				if err != nil {
					return Edited{}, pdfOpError(out, err)
				}
				return t.write(ctx, c, out, b, "", true)
			}).WithRoute("pdf_merge"),
		files.Define("pdf_split_pages", "Split a PDF into new files by page ranges (\"1-3\", \"4\", \"5-\"), one file per range, named <name>_<range>.pdf beside it or in output_dir (their source is derived).", false,
			func(ctx context.Context, c files.Caller, in PDFSplitArgs) (SplitResult, error) {
				src, err := t.read(ctx, c, "id", in.ID)
				if err != nil {
					return SplitResult{}, err
				}
				d, err := t.doc(ctx, src)
				if err != nil {
					return SplitResult{}, err
				}
				switch {
				case len(in.Ranges) == 0:
					return SplitResult{}, orchestrator.FieldErrorf("ranges", "name at least one page range, e.g. \"1-3\"")
				case len(in.Ranges) > MaxSplitParts:
					return SplitResult{}, orchestrator.FieldErrorf("ranges", "at most %d ranges per split", MaxSplitParts)
				}
				dir := path.Dir(src.path)
				if in.OutputDir != "" {
					if dir, err = files.CleanID("output_dir", in.OutputDir); err != nil {
						return SplitResult{}, err
					}
				}
				base := strings.TrimSuffix(path.Base(src.path), path.Ext(src.path))
				res := SplitResult{Files: []Edited{}}
				for _, r := range in.Ranges {
					r = strings.ReplaceAll(strings.TrimSpace(r), " ", "")
					sel, err := api.PagesForPageSelection(d.info.Pages, []string{r}, false, false)
					if err != nil || len(sel) == 0 || !validRange(r) {
						return SplitResult{}, orchestrator.FieldErrorf("ranges", "page range %q is not a range of pages within 1-%d (\"1-3\", \"4\", \"5-\")", r, d.info.Pages)
					}
					out := path.Join(dir, base+"_"+strings.ReplaceAll(r, "-", "to")+".pdf")
					b, err := guard(ctx, func() ([]byte, error) {
						var buf bytes.Buffer
						err := api.Collect(bytes.NewReader(src.data), &buf, []string{r}, pdfConf())
						return buf.Bytes(), err
					})
					if err != nil {
						return SplitResult{}, pdfOpError(src.path, err)
					}
					e, err := t.write(ctx, c, out, b, "", true)
					if err != nil {
						return SplitResult{}, err
					}
					res.Files = append(res.Files, e)
				}
				return res, nil
			}).WithRoute("pdf_split_pages"),
		files.Define("pdf_get_form_fields", "List the fields of a PDF's form: name, id, type, current value, options.", true,
			func(ctx context.Context, c files.Caller, in FileID) (FormFields, error) {
				src, err := t.read(ctx, c, "id", in.ID)
				if err != nil {
					return FormFields{}, err
				}
				if _, err := t.doc(ctx, src); err != nil {
					return FormFields{}, err
				}
				fs, err := guard(ctx, func() ([]FormField, error) {
					fields, err := api.FormFields(bytes.NewReader(src.data), pdfConf())
					if err != nil {
						if strings.Contains(err.Error(), "no form") {
							return []FormField{}, nil
						}
						return nil, err
					}
					out := make([]FormField, 0, len(fields))
					for _, f := range fields {
						ff := FormField{Name: f.Name, ID: f.ID, Type: fieldType(f.Typ), Value: f.V, Default: f.Dv, Pages: f.Pages, Locked: f.Locked}
						if f.Opts != "" {
							ff.Options = strings.Split(f.Opts, ",")
						}
						out = append(out, ff)
					}
					return out, nil
				})
				if err != nil {
					return FormFields{}, malformed(src.path, "PDF form", err)
				}
				return FormFields{ID: src.path, Fields: fs, Hash: src.info.Hash}, nil
			}).WithRoute("pdf_get_form_fields"),
		files.Define("pdf_fill_form", "Fill fields of a PDF's form by name or id (in place, or into output). With if_match, only if the file still has that hash.", false,
			func(ctx context.Context, c files.Caller, in PDFFillArgs) (Edited, error) {
				src, err := t.read(ctx, c, "id", in.ID)
				if err != nil {
					return Edited{}, err
				}
				out, derived, err := output("output", in.Output, src.path)
				if err != nil {
					return Edited{}, err
				}
				if len(in.Fields) == 0 {
					return Edited{}, orchestrator.FieldErrorf("fields", "name at least one field to fill")
				}
				fs, err := guard(ctx, func() ([]FormField, error) {
					fields, err := api.FormFields(bytes.NewReader(src.data), pdfConf())
					if err != nil {
						return nil, err
					}
					out := make([]FormField, 0, len(fields))
					for _, f := range fields {
						out = append(out, FormField{Name: f.Name, ID: f.ID, Type: fieldType(f.Typ), Pages: f.Pages})
					}
					return out, nil
				})
				if err != nil {
					return Edited{}, malformed(src.path, "PDF form", err)
				}
				data, err := fillJSON(fs, in.Fields)
				if err != nil {
					return Edited{}, err
				}
				return t.pdfEdit(ctx, c, src, out, derived, in.IfMatch.IfMatch, func(rs io.ReadSeeker, w io.Writer, conf *model.Configuration) error {
					return api.FillForm(rs, bytes.NewReader(data), w, conf)
				})
			}).WithRoute("pdf_fill_form"),
	}
}

// validRange is a page range as files.md writes it: n, n-m, n-.
func validRange(r string) bool {
	a, b, found := strings.Cut(r, "-")
	if _, err := strconv.Atoi(a); err != nil {
		return false
	}
	if !found || b == "" {
		return true
	}
	_, err := strconv.Atoi(b)
	return err == nil
}

func paperSize(s string) (types.Dim, bool) {
	for name, d := range types.PaperSize {
		if strings.EqualFold(name, s) && d != nil {
			return *d, true
		}
	}
	return types.Dim{}, false
}

// fillJSON is pdfcpu's form data setting values by field name or id.
func fillJSON(fields []FormField, values map[string]any) ([]byte, error) {
	var f form.Form
	for key, v := range values {
		var fd *FormField
		for i := range fields {
			if fields[i].Name == key || fields[i].ID == key {
				fd = &fields[i]
				break
			}
		}
		if fd == nil {
			names := make([]string, 0, len(fields))
			for _, x := range fields {
				names = append(names, x.Name)
			}
			return nil, orchestrator.FieldErrorf("fields", "the form has no field %q (its fields: %s)", key, strings.Join(names, ", "))
		}
		str := fmt.Sprint(v)
		switch fd.Type {
		case "checkbox":
			b, ok := v.(bool)
			if !ok {
				return nil, orchestrator.FieldErrorf("fields", "field %q is a checkbox: give true or false", key)
			}
			f.CheckBoxes = append(f.CheckBoxes, &form.CheckBox{ID: fd.ID, Name: fd.Name, Value: b, Pages: fd.Pages})
		case "radio":
			f.RadioButtonGroups = append(f.RadioButtonGroups, &form.RadioButtonGroup{ID: fd.ID, Name: fd.Name, Value: str, Pages: fd.Pages})
		case "combobox":
			f.ComboBoxes = append(f.ComboBoxes, &form.ComboBox{ID: fd.ID, Name: fd.Name, Value: str, Pages: fd.Pages})
		case "listbox":
			vals := []string{str}
			if a, ok := v.([]any); ok {
				vals = vals[:0]
				for _, e := range a {
					vals = append(vals, fmt.Sprint(e))
				}
			}
			f.ListBoxes = append(f.ListBoxes, &form.ListBox{ID: fd.ID, Name: fd.Name, Values: vals, Pages: fd.Pages})
		case "date":
			f.DateFields = append(f.DateFields, &form.DateField{ID: fd.ID, Name: fd.Name, Value: str, Pages: fd.Pages})
		default:
			f.TextFields = append(f.TextFields, &form.TextField{ID: fd.ID, Name: fd.Name, Value: str, Pages: fd.Pages})
		}
	}
	return json.Marshal(form.FormGroup{Forms: []form.Form{f}})
}
