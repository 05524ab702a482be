/* Decode only a region of a JPEG, optionally at 1/2, 1/4 or 1/8 of its size (libjpeg-turbo).
 *
 * A training crop needs the pixels of its box, not the whole image: libjpeg-turbo can leave out the inverse DCT,
 * upsampling and colour conversion of the columns left and right of the box (jpeg_crop_scanline), of the rows
 * above it (jpeg_skip_scanlines), and stop reading the file after the box's last row. The pixels it returns are
 * those of a whole decode at the same scale, in that region.
 *
 * A JPEG written with restart markers (a marker every few MCUs, at the start of every row's segments) lets the
 * decoder leave out more: each segment between two markers is entropy-coded on its own, so the segments the region
 * does not touch need not be read at all. The region's segments (and one MCU around it, for chroma upsampling's
 * neighbours) are copied into a smaller JPEG of their own, with the markers renumbered, and that is decoded: entropy
 * decoding, which a crop of a plain JPEG still pays for every column and every row above the region, is then paid
 * for the region alone. The pixels are the same. `ddptrain shard --restart-markers` writes such files (restart()).
 *
 * decode(data, denom, top, left, bottom, right) -> (bytearray rgb, x0, width) | None
 *   data: the JPEG's bytes; denom: 1, 2, 4 or 8; the region in the pixels of the image decoded at 1/denom.
 *   rgb holds (bottom - top) rows of `width` pixels (3 bytes each) starting at column x0 <= left: libjpeg-turbo
 *   widens the columns to whole blocks. None when the region cannot be decoded exactly: libjpeg-turbo reported an
 *   error or a warning (damaged or cut-short data), the image is not 1- or 3-component, or the region falls
 *   outside it. The caller then decodes the whole image its usual way, which gives such files their usual verdict.
 *
 * restart(data, mcus) -> bytes | None
 *   The same JPEG rewritten losslessly (the same DCT coefficients, so the same pixels) as one baseline scan with a
 *   restart marker every `mcus` MCUs or fewer (a divisor of the MCUs in a row, so every row starts a segment),
 *   with optimised Huffman tables; APPn and COM segments are kept. None where it cannot: not a colour or grayscale
 *   JPEG, or damaged.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <setjmp.h>
#include <stdio.h>
#include <string.h>

#include <jpeglib.h>
#include <stdlib.h>

#define MARGIN 2 /* columns decoded beyond the region on each side */
#define WIDEN (64 + 2 * MARGIN) /* more than the widest block group (4 x 8 pixels at full scale) on each side, and the margins */

struct guard {
    struct jpeg_error_mgr pub;
    jmp_buf escape;
};

static void on_error(j_common_ptr cinfo) {
    struct guard *g = (struct guard *)cinfo->err;
    longjmp(g->escape, 1);
}

static void on_message(j_common_ptr cinfo, int level) {
    if (level < 0) { /* a warning: corrupt or cut-short data, which a whole decode would also meet */
        struct guard *g = (struct guard *)cinfo->err;
        longjmp(g->escape, 1);
    }
}

/* 0 on success; -1 when the region cannot be decoded exactly (see above). */
static int decode_region(const unsigned char *data, unsigned long size, int denom, JDIMENSION top,
                         JDIMENSION left, JDIMENSION bottom, JDIMENSION right, unsigned char *pixels,
                         size_t capacity, JDIMENSION *x0, JDIMENSION *width) {
    struct jpeg_decompress_struct cinfo;
    struct guard err;
    cinfo.err = jpeg_std_error(&err.pub);
    err.pub.error_exit = on_error;
    err.pub.emit_message = on_message;
    jpeg_create_decompress(&cinfo);
    if (setjmp(err.escape)) {
        jpeg_destroy_decompress(&cinfo);
        return -1;
    }
    jpeg_mem_src(&cinfo, data, size);
    jpeg_read_header(&cinfo, TRUE);
    if (cinfo.num_components != 1 && cinfo.num_components != 3) {
        jpeg_destroy_decompress(&cinfo);
        return -1;
    }
    cinfo.out_color_space = JCS_RGB;
    cinfo.dct_method = JDCT_ISLOW;
    cinfo.scale_num = 1;
    cinfo.scale_denom = (unsigned int)denom;
    jpeg_start_decompress(&cinfo);
    if (right > cinfo.output_width || bottom > cinfo.output_height || left >= right || top >= bottom) {
        jpeg_abort_decompress(&cinfo);
        jpeg_destroy_decompress(&cinfo);
        return -1;
    }
    /* Chroma upsampling reads one neighbouring chroma sample each side: with a column of margin inside the
     * decoded columns, the region's edge pixels are those of the whole decode. */
    JDIMENSION start = left >= MARGIN ? left - MARGIN : 0;
    JDIMENSION end = right + MARGIN <= cinfo.output_width ? right + MARGIN : cinfo.output_width;
    JDIMENSION xoffset = start, cols = end - start;
    jpeg_crop_scanline(&cinfo, &xoffset, &cols);
    size_t row_bytes = (size_t)cols * 3;
    if (row_bytes * (bottom - top) > capacity) {
        jpeg_abort_decompress(&cinfo);
        jpeg_destroy_decompress(&cinfo);
        return -1;
    }
    if (top > 0 && jpeg_skip_scanlines(&cinfo, top) != top) {
        longjmp(err.escape, 1);
    }
    while (cinfo.output_scanline < bottom) {
        JSAMPROW row = pixels + row_bytes * (cinfo.output_scanline - top);
        if (jpeg_read_scanlines(&cinfo, &row, 1) != 1) {
            longjmp(err.escape, 1);
        }
    }
    jpeg_abort_decompress(&cinfo); /* the rows below the region are never read */
    jpeg_destroy_decompress(&cinfo);
    *x0 = xoffset;
    *width = cols;
    return 0;
}


/* Where the restart segments of a single-scan, Huffman-coded JPEG lie: the image is cut into a grid of units
 * (a segment each) of unit_w x unit_h pixels, units_per_row across and unit_rows down. */
struct layout {
    size_t sof_at, sos_end, end; /* the SOF segment's marker; the first entropy-coded byte; the EOI marker */
    unsigned width, height, unit_w, unit_h, units_per_row, unit_rows, mcu_w, mcu_h;
    size_t *cuts; /* units + 1 offsets: cuts[k] is where unit k's marker lies (cuts[0]: sos_end), the last is end */
};

static unsigned be16(const unsigned char *p) { return ((unsigned)p[0] << 8) | p[1]; }

/* The segments' header facts; 0 where the file is a single-scan Huffman JPEG with restart markers that start
 * every row (or every few rows), -1 otherwise. */
static int read_header(const unsigned char *data, size_t size, struct layout *lay) {
    size_t at = 2;
    unsigned restart = 0, components = 0, hmax = 0, vmax = 0;
    int sof = 0;
    while (at + 4 <= size) {
        if (data[at] != 0xFF) return -1;
        unsigned marker = data[at + 1];
        if (marker == 0xFF) { at++; continue; }
        if (marker == 0x01 || (marker >= 0xD0 && marker <= 0xD9)) return -1;
        size_t length = be16(data + at + 2);
        if (length < 2 || at + 2 + length > size) return -1;
        const unsigned char *body = data + at + 4;
        if (marker == 0xC0 || marker == 0xC1) {
            if (sof || length < 8 || body[0] != 8) return -1;
            lay->height = be16(body + 1);
            lay->width = be16(body + 3);
            components = body[5];
            if ((components != 1 && components != 3) || length != 8 + 3 * components) return -1;
            for (unsigned c = 0; c < components; c++) {
                unsigned h = body[7 + 3 * c] >> 4, v = body[7 + 3 * c] & 15;
                if (h < 1 || h > 2 || v < 1 || v > 2) return -1;
                hmax = h > hmax ? h : hmax;
                vmax = v > vmax ? v : vmax;
            }
            lay->sof_at = at;
            sof = 1;
        } else if ((marker >= 0xC2 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC)) {
            return -1; /* progressive, lossless or arithmetic-coded */
        } else if (marker == 0xDD) {
            if (length != 4) return -1;
            restart = be16(body);
        } else if (marker == 0xDA) {
            if (!sof || length < 3 || body[0] != components) return -1; /* all components in this one scan */
            lay->sos_end = at + 2 + length;
            break;
        }
        at += 2 + length;
    }
    if (!sof || !lay->sos_end || restart == 0 || lay->width == 0 || lay->height == 0) return -1;
    if (components == 1) hmax = vmax = 1; /* a non-interleaved scan's MCU is one block */
    lay->mcu_w = 8 * hmax;
    lay->mcu_h = 8 * vmax;
    unsigned per_row = (lay->width + lay->mcu_w - 1) / lay->mcu_w;
    unsigned rows = (lay->height + lay->mcu_h - 1) / lay->mcu_h;
    if (per_row % restart == 0) {
        lay->units_per_row = per_row / restart;
        lay->unit_w = restart * lay->mcu_w;
        lay->unit_h = lay->mcu_h;
        lay->unit_rows = rows;
    } else if (restart % per_row == 0) {
        unsigned k = restart / per_row;
        lay->units_per_row = 1;
        lay->unit_w = per_row * lay->mcu_w;
        lay->unit_h = k * lay->mcu_h;
        lay->unit_rows = (rows + k - 1) / k;
    } else {
        return -1; /* segments that straddle rows */
    }
    return 0;
}

/* The offsets of every restart marker, checked: as many as the grid has units (less one), numbered 0-7 in turn,
 * and no other marker before the EOI. 0 on success, -1 otherwise (lay->cuts then NULL). */
static int find_segments(const unsigned char *data, size_t size, struct layout *lay) {
    size_t units = (size_t)lay->units_per_row * lay->unit_rows;
    lay->cuts = NULL;
    if (size < lay->sos_end + 2 || data[size - 2] != 0xFF || data[size - 1] != 0xD9 || units > size / 2 + 1) return -1;
    lay->end = size - 2;
    size_t *cuts = malloc((units + 1) * sizeof(size_t));
    if (cuts == NULL) return -1;
    size_t found = 1, pos = lay->sos_end;
    cuts[0] = lay->sos_end;
    while (pos < lay->end) {
        const unsigned char *p = memchr(data + pos, 0xFF, lay->end - pos);
        if (p == NULL) break;
        size_t at = (size_t)(p - data);
        unsigned next = data[at + 1];
        if (next == 0x00) {
            pos = at + 2;
        } else if (next == 0xFF) {
            pos = at + 1; /* a fill byte */
        } else if (next >= 0xD0 && next <= 0xD7 && found < units && next - 0xD0 == (found - 1) % 8) {
            cuts[found++] = at;
            pos = at + 2;
        } else {
            free(cuts);
            return -1;
        }
    }
    if (found != units) {
        free(cuts);
        return -1;
    }
    cuts[units] = lay->end;
    lay->cuts = cuts;
    return 0;
}

/* A JPEG of the units rows r0..r1, columns c0..c1 alone, in `out` (room for size + 16 bytes); its length. */
static size_t cut_out(const unsigned char *data, const struct layout *lay, unsigned r0, unsigned r1, unsigned c0,
                      unsigned c1, unsigned char *out) {
    unsigned width = (c1 * lay->unit_w < lay->width ? c1 * lay->unit_w : lay->width) - c0 * lay->unit_w;
    unsigned height = (r1 * lay->unit_h < lay->height ? r1 * lay->unit_h : lay->height) - r0 * lay->unit_h;
    size_t n = lay->sof_at + 5;
    memcpy(out, data, n);
    out[n++] = (unsigned char)(height >> 8);
    out[n++] = (unsigned char)height;
    out[n++] = (unsigned char)(width >> 8);
    out[n++] = (unsigned char)width;
    memcpy(out + n, data + lay->sof_at + 9, lay->sos_end - lay->sof_at - 9);
    n += lay->sos_end - lay->sof_at - 9;
    unsigned written = 0;
    for (unsigned r = r0; r < r1; r++) {
        for (unsigned c = c0; c < c1; c++) {
            size_t k = (size_t)r * lay->units_per_row + c;
            size_t from = k == 0 ? lay->cuts[0] : lay->cuts[k] + 2, to = lay->cuts[k + 1];
            if (written > 0) {
                out[n++] = 0xFF;
                out[n++] = (unsigned char)(0xD0 + (written - 1) % 8);
            }
            memcpy(out + n, data + from, to - from);
            n += to - from;
            written++;
        }
    }
    out[n++] = 0xFF;
    out[n++] = 0xD9;
    return n;
}

/* decode_region through the restart segments the region needs, where the file has them: 0 and the region as
 * decode_region gives it; 1 where the file has no usable restart markers (decode it whole); -1 on failure. */
static int decode_segments(const unsigned char *data, size_t size, int denom, JDIMENSION top, JDIMENSION left,
                           JDIMENSION bottom, JDIMENSION right, unsigned char *pixels, size_t capacity,
                           JDIMENSION *x0, JDIMENSION *width) {
    struct layout lay;
    memset(&lay, 0, sizeof lay);
    if (read_header(data, size, &lay) != 0 || find_segments(data, size, &lay) != 0) return 1;
    /* one MCU beyond the region each way: chroma upsampling reads a neighbouring sample */
    long y0 = (long)top * denom - lay.mcu_h, y1 = (long)bottom * denom + lay.mcu_h;
    long xa = (long)left * denom - lay.mcu_w, xb = (long)right * denom + lay.mcu_w;
    unsigned r0 = y0 <= 0 ? 0 : (unsigned)(y0 / lay.unit_h);
    unsigned c0 = xa <= 0 ? 0 : (unsigned)(xa / lay.unit_w);
    unsigned r1 = (unsigned)((y1 + lay.unit_h - 1) / lay.unit_h), c1 = (unsigned)((xb + lay.unit_w - 1) / lay.unit_w);
    r1 = r1 < lay.unit_rows ? r1 : lay.unit_rows;
    c1 = c1 < lay.units_per_row ? c1 : lay.units_per_row;
    if (r0 >= r1 || c0 >= c1 || (r0 == 0 && c0 == 0 && c1 == lay.units_per_row)) {
        free(lay.cuts);
        return 1; /* nothing to leave out before the region's last row */
    }
    unsigned char *part = malloc(size + 16);
    if (part == NULL) {
        free(lay.cuts);
        return -1;
    }
    size_t length = cut_out(data, &lay, r0, r1, c0, c1, part);
    free(lay.cuts);
    JDIMENSION dy = r0 * lay.unit_h / denom, dx = c0 * lay.unit_w / denom;
    int status = decode_region(part, length, denom, top - dy, left - dx, bottom - dy, right - dx, pixels, capacity,
                               x0, width);
    free(part);
    *x0 += dx;
    return status;
}

static PyObject *decode(PyObject *self, PyObject *args) {
    Py_buffer data;
    int denom;
    unsigned int top, left, bottom, right;
    if (!PyArg_ParseTuple(args, "y*iIIII", &data, &denom, &top, &left, &bottom, &right)) {
        return NULL;
    }
    if (denom != 1 && denom != 2 && denom != 4 && denom != 8) {
        PyBuffer_Release(&data);
        PyErr_SetString(PyExc_ValueError, "denom must be 1, 2, 4 or 8");
        return NULL;
    }
    if (left >= right || top >= bottom || right - left > 65535 || bottom - top > 65535) {
        PyBuffer_Release(&data);
        Py_RETURN_NONE;
    }
    /* The region widened to whole blocks gains less than WIDEN columns; the bytearray is written once, in place. */
    size_t capacity = (size_t)(right - left + WIDEN) * 3 * (bottom - top);
    PyObject *rgb = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)capacity);
    if (rgb == NULL) {
        PyBuffer_Release(&data);
        return NULL;
    }
    unsigned char *pixels = (unsigned char *)PyByteArray_AS_STRING(rgb);
    JDIMENSION x0 = 0, width = 0;
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = decode_segments((const unsigned char *)data.buf, (size_t)data.len, denom, top, left, bottom, right,
                             pixels, capacity, &x0, &width);
    if (status == 1) {
        status = decode_region((const unsigned char *)data.buf, (unsigned long)data.len, denom, top, left, bottom,
                               right, pixels, capacity, &x0, &width);
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&data);
    if (status != 0) {
        Py_DECREF(rgb);
        Py_RETURN_NONE;
    }
    if (PyByteArray_Resize(rgb, (Py_ssize_t)width * 3 * (bottom - top)) != 0) {
        Py_DECREF(rgb);
        return NULL;
    }
    return Py_BuildValue("(NII)", rgb, (unsigned int)x0, (unsigned int)width);
}


/* The largest divisor of `per_row` that is at most `most` (at least 1). */
static unsigned interval_for(unsigned per_row, unsigned most) {
    for (unsigned k = most < per_row ? most : per_row; k > 1; k--) {
        if (per_row % k == 0) return k;
    }
    return 1;
}

static int is_app(const jpeg_saved_marker_ptr m, unsigned marker, const char *tag, size_t tag_length) {
    return m->marker == marker && m->data_length >= tag_length && memcmp(m->data, tag, tag_length) == 0;
}

/* 0 and the rewritten file in *out (malloc'd; the caller frees it) or -1. */
static int rewrite(const unsigned char *data, unsigned long size, unsigned most, unsigned char **out,
                   unsigned long *out_size) {
    struct jpeg_decompress_struct src;
    struct jpeg_compress_struct dst;
    struct guard err, dst_err;
    src.err = jpeg_std_error(&err.pub);
    err.pub.error_exit = on_error;
    err.pub.emit_message = on_message;
    dst.err = jpeg_std_error(&dst_err.pub);
    dst_err.pub.error_exit = on_error;
    dst_err.pub.emit_message = on_message;
    jpeg_create_decompress(&src);
    jpeg_create_compress(&dst);
    if (setjmp(err.escape) || setjmp(dst_err.escape)) {
        jpeg_destroy_compress(&dst);
        jpeg_destroy_decompress(&src);
        return -1;
    }
    jpeg_mem_src(&src, data, size);
    for (int m = 0; m < 16; m++) jpeg_save_markers(&src, JPEG_APP0 + m, 0xFFFF);
    jpeg_save_markers(&src, JPEG_COM, 0xFFFF);
    jpeg_read_header(&src, TRUE);
    if (src.num_components != 1 && src.num_components != 3) longjmp(err.escape, 1);
    jvirt_barray_ptr *coefficients = jpeg_read_coefficients(&src);
    jpeg_mem_dest(&dst, out, out_size);
    jpeg_copy_critical_parameters(&src, &dst);
    dst.optimize_coding = TRUE;
    unsigned per_row = src.num_components == 1
                           ? (src.image_width + 7) / 8
                           : (src.image_width + 8 * src.max_h_samp_factor - 1) / (8 * src.max_h_samp_factor);
    dst.restart_interval = interval_for(per_row, most);
    jpeg_write_coefficients(&dst, coefficients);
    for (jpeg_saved_marker_ptr m = src.marker_list; m != NULL; m = m->next) {
        if ((dst.write_JFIF_header && is_app(m, JPEG_APP0, "JFIF", 5)) ||
            (dst.write_Adobe_marker && is_app(m, JPEG_APP0 + 14, "Adobe", 5))) {
            continue; /* the library writes its own */
        }
        jpeg_write_marker(&dst, m->marker, m->data, m->data_length);
    }
    jpeg_finish_compress(&dst);
    jpeg_finish_decompress(&src);
    jpeg_destroy_compress(&dst);
    jpeg_destroy_decompress(&src);
    return 0;
}

static PyObject *restart(PyObject *self, PyObject *args) {
    Py_buffer data;
    unsigned int most;
    if (!PyArg_ParseTuple(args, "y*I", &data, &most)) {
        return NULL;
    }
    unsigned char *out = NULL;
    unsigned long out_size = 0;
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = rewrite((const unsigned char *)data.buf, (unsigned long)data.len, most ? most : 1, &out, &out_size);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&data);
    if (status != 0) {
        free(out);
        Py_RETURN_NONE;
    }
    PyObject *result = PyBytes_FromStringAndSize((const char *)out, (Py_ssize_t)out_size);
    free(out);
    return result;
}

static PyMethodDef methods[] = {
    {"decode", decode, METH_VARARGS,
     "decode(data, denom, top, left, bottom, right) -> (bytearray rgb, x0, width) or None: the region's rows of "
     "the JPEG decoded at 1/denom, columns widened to whole blocks from x0."},
    {"restart", restart, METH_VARARGS,
     "restart(data, mcus) -> bytes or None: the JPEG rewritten losslessly with a restart marker every `mcus` MCUs "
     "or fewer, every row starting a segment."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_jpegregion",
                                    "Region decoding of JPEGs with libjpeg-turbo.", -1, methods};

PyMODINIT_FUNC PyInit__jpegregion(void) { return PyModule_Create(&module); }
