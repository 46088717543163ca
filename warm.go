package main

import (
	_ "github.com/coder/websocket"
	_ "github.com/docker/docker/api/types/container"
	_ "github.com/docker/docker/client"
	_ "github.com/docker/docker/pkg/stdcopy"
	_ "github.com/hanwen/go-fuse/v2/fs"
	_ "github.com/hanwen/go-fuse/v2/fuse"
	_ "github.com/invopop/jsonschema"
	_ "github.com/labstack/echo/v4"
	_ "github.com/labstack/echo/v4/middleware"
	_ "github.com/santhosh-tekuri/jsonschema/v6"
	_ "gorm.io/driver/sqlite"
	_ "gorm.io/gorm"
)

func main() {}
