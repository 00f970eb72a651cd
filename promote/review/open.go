package review

import (
	"fmt"

	git "github.com/go-git/go-git/v5"
)

// Open opens the Git repository at dir (a worktree or a bare repository;
// parent directories are not searched).
func Open(dir string) (*git.Repository, error) {
	repo, err := git.PlainOpen(dir)
	if err != nil {
		return nil, fmt.Errorf("open git repository %s: %w", dir, err)
	}
	return repo, nil
}
