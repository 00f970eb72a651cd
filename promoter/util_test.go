package promoter_test

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/configpub/configpub/internal/pointernote"
)

const minute = time.Minute

func containsStr(s, sub string) bool { return strings.Contains(s, sub) }

type pointerNote = pointernote.Note

func waitNotification(ctx context.Context, conn *pgx.Conn) (pointerNote, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	n, err := conn.WaitForNotification(ctx)
	if err != nil {
		return pointerNote{}, err
	}
	var p pointerNote
	err = json.Unmarshal([]byte(n.Payload), &p)
	return p, err
}
