package js

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestBufferFrom(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		text string
		want []byte // nil: Buffer.from refuses it
	}{
		{`[1,-1,256.7,"3","x",1e400]`, []byte{1, 255, 0, 3, 0, 0}},
		{`[]`, []byte{}},
		{`{"length":3,"0":1,"2":"2"}`, []byte{1, 0, 2}},
		{`{"length":"3"}`, []byte{}},
		{`{"length":2.9,"0":300}`, []byte{44, 0}},
		{`{"length":-4}`, []byte{}},
		{`{"type":"Buffer","data":[7,8]}`, []byte{7, 8}},
		{`{"type":"Buffer","data":"78"}`, nil},
		{`{"type":"buffer","data":[7]}`, nil},
		{`{}`, nil},
		{`"text"`, nil},
		{`5`, nil},
		{`null`, nil},
	} {
		got, ok, err := BufferFrom(decoded(t, tt.text), 16)
		assert.NoError(t, err, tt.text)
		assert.Equal(t, tt.want != nil, ok, tt.text)
		assert.Equal(t, tt.want, got, tt.text)
	}
	_, ok, err := BufferFrom(decoded(t, `{"length":17}`), 16)
	assert.True(t, ok)
	assert.ErrorIs(t, err, ErrTooLong)
	got, _, err := BufferFrom(decoded(t, `{"length":16}`), 16)
	assert.NoError(t, err)
	assert.Len(t, got, 16)
}
