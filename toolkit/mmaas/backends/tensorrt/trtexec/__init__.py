"""trtexec"""
