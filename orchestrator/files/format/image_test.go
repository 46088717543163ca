package format

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/color"
	_ "image/jpeg"
	_ "image/png"
	"strings"
	"testing"

	_ "golang.org/x/image/webp"

	"github.com/filepath-dev/filepath/orchestrator"
)

func decodeImage(t *testing.T, b []byte) (image.Image, string) {
	t.Helper()
	img, f, err := image.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	return img, f
}

func TestThumbnail(t *testing.T) {
	f := newFixture(t, 0)
	f.put(t, "/photo.jpg", jpegOf(t, gradient(1200, 800, false)))
	f.put(t, "/logo.png", pngOf(t, gradient(300, 600, true)))
	f.put(t, "/small.webp", webpOf(t, gradient(40, 20, false)))
	f.put(t, "/notes.txt", []byte("not an image"))
	f.put(t, "/broken.png", pngOf(t, gradient(50, 50, false))[:60])
	for _, c := range []struct {
		name, path string
		size, w, h int
		ct         string
	}{
		{"a photo fits the square, as JPEG", "/photo.jpg", 256, 256, 170, "image/jpeg"},
		{"transparency stays PNG", "/logo.png", 100, 50, 100, "image/png"},
		{"never enlarged", "/small.webp", 256, 40, 20, "image/jpeg"},
	} {
		t.Run(c.name, func(t *testing.T) {
			th, err := Thumbnail(f.ctx, f.s, f.fs, c.path, c.size)
			if err != nil {
				t.Fatal(err)
			}
			img, _ := decodeImage(t, th.Data)
			if th.ContentType != c.ct || img.Bounds().Dx() != c.w || img.Bounds().Dy() != c.h || !strings.HasPrefix(th.ETag, `"`) {
				t.Fatalf("%s %dx%d etag %s", th.ContentType, img.Bounds().Dx(), img.Bounds().Dy(), th.ETag)
			}
		})
	}
	// the second is the cache's, until the file changes
	before := f.s.Cache().Stats()
	if _, err := Thumbnail(f.ctx, f.s, f.fs, "/photo.jpg", 256); err != nil {
		t.Fatal(err)
	}
	if after := f.s.Cache().Stats(); after.Hits <= before.Hits {
		t.Fatalf("no cache hit: %+v then %+v", before, after)
	}
	old, _ := Thumbnail(f.ctx, f.s, f.fs, "/photo.jpg", 256)
	f.put(t, "/photo.jpg", jpegOf(t, gradient(800, 1200, false)))
	th, err := Thumbnail(f.ctx, f.s, f.fs, "/photo.jpg", 256)
	if err != nil {
		t.Fatal(err)
	}
	if img, _ := decodeImage(t, th.Data); img.Bounds().Dx() != 170 || th.ETag == old.ETag {
		t.Fatalf("after a change: %dx%d, etag %s (was %s)", img.Bounds().Dx(), img.Bounds().Dy(), th.ETag, old.ETag)
	}

	if _, err := Thumbnail(f.ctx, f.s, f.fs, "/notes.txt", 256); orchestrator.ErrorCode(err) != orchestrator.EUnsupportedMedia {
		t.Fatalf("text: %v", err)
	}
	if _, err := Thumbnail(f.ctx, f.s, f.fs, "/broken.png", 256); orchestrator.ErrorCode(err) != orchestrator.EInvalid || !strings.Contains(err.Error(), "/broken.png") {
		t.Fatalf("broken: %v", err)
	}
	if _, err := Thumbnail(f.ctx, f.s, f.fs, "/photo.jpg", 4096); orchestrator.ErrorCode(err) != orchestrator.EInvalid {
		t.Fatalf("size 4096: %v", err)
	}
}

// TestPixelBound: an image whose header claims more than MaxPixels is
// refused before anything is decoded.
func TestPixelBound(t *testing.T) {
	f := newFixture(t, 0)
	// a PNG header of 10000 x 10000 (100 megapixels) over a tiny body
	b := pngOf(t, image.NewGray(image.Rect(0, 0, 1, 1)))
	b = append([]byte(nil), b...)
	copy(b[16:24], []byte{0, 0, 0x27, 0x10, 0, 0, 0x27, 0x10})
	binary.BigEndian.PutUint32(b[29:33], crc32.ChecksumIEEE(b[12:29])) // IHDR's checksum
	f.put(t, "/huge.png", b)
	err := f.call(t, "image_to_base64", map[string]any{"id": "/huge.png"}, nil)
	if orchestrator.ErrorCode(err) != orchestrator.EInvalid || !strings.Contains(err.Error(), "at most 50 megapixels") {
		t.Fatalf("err %v", err)
	}
	var info ImageInfo
	err = f.call(t, "image_info", map[string]any{"id": "/huge.png"}, &info)
	if orchestrator.ErrorCode(err) != orchestrator.EInvalid {
		t.Fatalf("info of a huge image: %v %+v", err, info)
	}
}

// TestImageEdits: each operation, read back by decoding what it wrote.
func TestImageEdits(t *testing.T) {
	f := newFixture(t, 0)
	src := gradient(400, 200, false)
	f.put(t, "/p.png", pngOf(t, src))
	var info ImageInfo
	f.must(t, "image_info", map[string]any{"id": "/p.png"}, &info)
	if info.Format != "png" || info.Width != 400 || info.Height != 200 || info.ColorModel != "rgba" {
		t.Fatalf("info %+v", info)
	}
	size := func(p string) (int, int, string) {
		img, f := decodeImage(t, f.get(t, p))
		return img.Bounds().Dx(), img.Bounds().Dy(), f
	}
	for _, c := range []struct {
		name string
		args map[string]any
		w, h int
	}{
		{"cover crops to the box", map[string]any{"width": 100, "height": 100, "fit": "cover"}, 100, 100},
		{"contain fits inside", map[string]any{"width": 100, "height": 100, "fit": "contain"}, 100, 50},
		{"fill stretches", map[string]any{"width": 100, "height": 100, "fit": "fill"}, 100, 100},
		{"one side keeps the aspect", map[string]any{"width": 200}, 200, 100},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.args["id"], c.args["output"] = "/p.png", "/r.png"
			f.must(t, "image_resize", c.args, nil)
			if w, h, _ := size("/r.png"); w != c.w || h != c.h {
				t.Fatalf("%dx%d, want %dx%d", w, h, c.w, c.h)
			}
		})
	}
	f.must(t, "image_crop", map[string]any{"id": "/p.png", "left": 10, "top": 20, "width": 30, "height": 40, "output": "/c.png"}, nil)
	img, _ := decodeImage(t, f.get(t, "/c.png"))
	if img.Bounds().Dx() != 30 || img.Bounds().Dy() != 40 || !sameColor(img.At(0, 0), src.At(10, 20)) {
		t.Fatalf("crop %v %v vs %v", img.Bounds(), img.At(0, 0), src.At(10, 20))
	}
	if err := f.call(t, "image_crop", map[string]any{"id": "/p.png", "left": 390, "top": 0, "width": 30, "height": 10}, nil); orchestrator.ErrorCode(err) != orchestrator.EInvalid {
		t.Fatalf("a crop past the edge: %v", err)
	}
	f.must(t, "image_rotate", map[string]any{"id": "/p.png", "degrees": 90, "output": "/rot.png"}, nil)
	img, _ = decodeImage(t, f.get(t, "/rot.png"))
	if img.Bounds().Dx() != 200 || img.Bounds().Dy() != 400 || !sameColor(img.At(199, 0), src.At(0, 0)) {
		t.Fatalf("rotate %v", img.Bounds())
	}
	var e Edited
	f.must(t, "image_convert", map[string]any{"id": "/p.png", "format": "webp"}, &e)
	if w, h, ft := size("/p.webp"); e.ID != "/p.webp" || w != 400 || h != 200 || ft != "webp" {
		t.Fatalf("webp: %+v %dx%d %s", e, w, h, ft)
	}
	f.must(t, "image_convert", map[string]any{"id": "/p.webp", "format": "jpeg", "quality": 70}, &e)
	if w, _, ft := size("/p.jpg"); e.ID != "/p.jpg" || w != 400 || ft != "jpeg" {
		t.Fatalf("jpeg: %+v %s", e, ft)
	}
	if m, err := f.fs.MetaOf(f.ctx, mustStat(t, f, "/p.jpg")); err != nil || m.Source != "derived" || m.MimeType != "image/jpeg" {
		t.Fatalf("converted file's meta %+v %v", m, err)
	}
	// in place, with if_match: the first wins, the second is told
	info0 := mustStat(t, f, "/p.png")
	f.must(t, "image_rotate", map[string]any{"id": "/p.png", "degrees": 180, "if_match": info0.Hash}, nil)
	err := f.call(t, "image_rotate", map[string]any{"id": "/p.png", "degrees": 180, "if_match": info0.Hash}, nil)
	if orchestrator.ErrorCode(err) != orchestrator.EPreconditionFailed {
		t.Fatalf("stale if_match: %v", err)
	}
	var b64 ImageBase64
	f.must(t, "image_to_base64", map[string]any{"id": "/p.jpg", "max_width": 100}, &b64)
	raw, _ := base64.StdEncoding.DecodeString(b64.Data)
	if cfg, _, err := image.DecodeConfig(bytes.NewReader(raw)); err != nil || cfg.Width != 100 || cfg.Height != 50 || b64.MimeType != "image/jpeg" {
		t.Fatalf("base64 %+v %v %s", cfg, err, b64.MimeType)
	}
}

func sameColor(a, b color.Color) bool {
	r1, g1, b1, a1 := a.RGBA()
	r2, g2, b2, a2 := b.RGBA()
	return r1 == r2 && g1 == g2 && b1 == b2 && a1 == a2
}

// TestImageComposite: an overlay lands at its place, its transparent
// pixels leave the base as it was, an opacity mixes it, what falls outside
// is clipped, and a bad opacity or a missing overlay is refused by name.
func TestImageComposite(t *testing.T) {
	f := newFixture(t, 0)
	base := image.NewNRGBA(image.Rect(0, 0, 40, 30))
	for i := range base.Pix {
		base.Pix[i] = 255 // white
	}
	logo := image.NewNRGBA(image.Rect(0, 0, 10, 10))
	for y := range 10 {
		for x := range 10 {
			if x < 5 {
				logo.Set(x, y, color.NRGBA{R: 255, A: 255}) // red half; the right half stays transparent
			}
		}
	}
	f.put(t, "/base.png", pngOf(t, base))
	f.put(t, "/logo.png", pngOf(t, logo))
	f.must(t, "image_composite", map[string]any{"id": "/base.png", "overlay": "/logo.png", "left": 35, "top": 5, "output": "/out.png"}, nil)
	img, _ := decodeImage(t, f.get(t, "/out.png"))
	red, white := color.NRGBA{R: 255, A: 255}, color.NRGBA{R: 255, G: 255, B: 255, A: 255}
	for _, c := range []struct {
		x, y int
		want color.Color
	}{{35, 5, red}, {39, 14, red}, {34, 5, white}, {35, 15, white}, {0, 0, white}} {
		if got := img.At(c.x, c.y); !sameColor(got, c.want) {
			t.Errorf("(%d,%d) = %v, want %v", c.x, c.y, got, c.want)
		}
	}
	if img.Bounds().Dx() != 40 || img.Bounds().Dy() != 30 {
		t.Fatalf("the result is %v, want the base's 40x30 (the overlay clipped)", img.Bounds())
	}
	f.must(t, "image_composite", map[string]any{"id": "/base.png", "overlay": "/logo.png", "opacity": 0.5, "output": "/half.png"}, nil)
	img, _ = decodeImage(t, f.get(t, "/half.png"))
	if r, g, _, _ := img.At(0, 0).RGBA(); r>>8 != 255 || g>>8 < 120 || g>>8 > 135 {
		t.Fatalf("half-opaque red over white = %v, want pink", img.At(0, 0))
	}
	if err := f.call(t, "image_composite", map[string]any{"id": "/base.png", "overlay": "/logo.png", "opacity": 1.5}, nil); orchestrator.ErrorCode(err) != orchestrator.EInvalid || !strings.Contains(orchestrator.ErrorMessage(err), "opacity") {
		t.Fatalf("opacity 1.5: %v", err)
	}
	if err := f.call(t, "image_composite", map[string]any{"id": "/base.png", "overlay": "/nope.png"}, nil); orchestrator.ErrorCode(err) != orchestrator.ENotFound {
		t.Fatalf("a missing overlay: %v", err)
	}
}
